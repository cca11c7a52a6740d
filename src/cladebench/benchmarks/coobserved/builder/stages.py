"""The SQL stages that find co-observed photos in an iNat open-data export, out of core in DuckDB.

**Bad rows are counted, never fatal, never silent.** Each file is read as text (:mod:`.reading`); a line DuckDB
cannot split into the header's columns is counted as ``malformed_line`` (with DuckDB's error type), and a short
line is padded with nulls and then fails the checks below. Each row is checked in SQL (:data:`ROW_CHECKS`): a
required field missing (``missing_fields``); a value the build relies on (:data:`CHECKED_TYPES`) that does not
parse as its ``structure.sql`` type, or a coordinate out of range (``invalid_value``); an ancestry that is not ids
joined by ``/`` (``malformed_ancestry``); a duplicated ``(photo_id, observation)`` row (``duplicate_row``, kept
once) or taxon id (``duplicate_taxon_id``; the id is then unusable), an observer id on several rows
(``duplicate_observer_id``, the rows beyond the first; the observer is the least row by login and name, whatever
the file order, and ids whose rows disagree are counted in the notes as ``observer_ids_on_disagreeing_rows``). A
photo one of whose rows is bad is left out as a whole (``invalid_photo_row``), since its observation count cannot
be trusted.

Why a module: this is the part that scans hundreds of millions of rows; every stage is one method of
:class:`Stages`, so a test (or a benchmark) can run, replace or interrupt one stage alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench.benchmarks.coobserved.builder.checks import GROUP_CHECKS, PHOTO_CHECKS, TAXON_CHECKS, case_sql
from cladebench.benchmarks.coobserved.builder.config import CoObservedBuildConfig
from cladebench.benchmarks.coobserved.builder.reading import ExportFile
from cladebench.curate import inat_export
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    import duckdb

# --- the stages ----------------------------------------------------------------------------------


def _evaluate_parts(tol: bool) -> tuple[list[str], list[str], str, str, str]:
    """SQL pieces of the evaluation: the joins per side, the organism columns, the divergence rank and the
    two organisms' sort keys (their names kingdom .. species, then the observation uuid)."""
    sides, columns = [], []
    # The binomial under the lineage's genus, epithet in lower case, as a Lineage holds it (the name alone when
    # the export lacks the genus).
    species_binomial = ("coalesce(l{s}.name_genus || ' ' || lower(regexp_replace(l{s}.name_species, '^\\S+\\s+', '')), "
                        "l{s}.name_species)")
    for s in ("a", "b"):
        sides.append(f"""
            LEFT JOIN observations_found o{s} ON o{s}.observation_uuid = c.obs_{s}
            LEFT JOIN lineages l{s} ON l{s}.taxon_id = o{s}.taxon_id""")
        columns.append(", ".join([
            f"CAST(c.obs_{s} AS VARCHAR) AS obs_{s}_uuid", f"o{s}.taxon_id AS taxon_{s}",
            f"o{s}.quality_grade AS grade_{s}", f"l{s}.id_species AS species_{s}",
            *(f"l{s}.name_{c} AS {c}_{s}" for c in RANK_COLUMNS[:-1]),
            f"{species_binomial.format(s=s)} AS species_name_{s}", f"l{s}.name_species AS binomial_{s}",
            (f"lower(l{s}.name_species) IN (SELECT value FROM tol)" if tol else "NULL::BOOLEAN") + f" AS in_tol_{s}",
            f"o{s}.latitude AS latitude_{s}", f"o{s}.longitude AS longitude_{s}",
            f"o{s}.observed_on AS observed_on_{s}", f"o{s}.positional_accuracy AS accuracy_{s}",
        ]))
    divergence = "CASE " + " ".join(
        f"WHEN la.id_{c} IS DISTINCT FROM lb.id_{c} THEN {i}" for i, c in enumerate(RANK_COLUMNS)) + " END"
    keys = ["[" + ", ".join(f"l{s}.name_{c}" for c in RANK_COLUMNS) + f", CAST(c.obs_{s} AS VARCHAR)]"
            for s in ("a", "b")]
    return sides, columns, divergence, keys[0], keys[1]


class Stages:
    """The SQL of a build, one method per stage; tables stay in DuckDB between stages."""

    def __init__(self, con: duckdb.DuckDBPyConnection, files: Mapping[str, ExportFile], config: CoObservedBuildConfig):
        self.con, self.files, self.config = con, files, config
        self.row_issues: dict[str, Counter[str]] = {t: Counter() for t in inat_export.TABLES}
        self.rows_read: dict[str, int] = {}
        self.malformed_kinds: dict[str, dict[str, int]] = {}
        self.notes: dict[str, int] = {}

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        return self.con.sql(query)

    def one(self, query: str) -> tuple[Any, ...]:
        """The first row of a query (DuckDB 2's relations have no ``fetchone``)."""
        return self.con.sql(query).fetchall()[0]

    def _count_rejects(self, table: str) -> int:
        rows = self.sql(f"SELECT error_type, count(*) FROM rejects_{table} GROUP BY ALL ORDER BY 1").fetchall()
        kinds = {str(kind): int(n) for kind, n in rows}
        if kinds:
            self.malformed_kinds[table] = kinds
            self.row_issues[table]["malformed_line"] += sum(kinds.values())
        return sum(kinds.values())

    def _tally(self, table: str, query: str) -> None:
        """Lines read and bad rows by issue, from a query of ``(issue, rows)``."""
        total = self._count_rejects(table)
        for issue, n in self.sql(query).fetchall():
            total += int(n)
            if issue is not None:
                self.row_issues[table][issue] += int(n)
        self.rows_read[table] = total

    def photo_ids(self) -> None:
        """First scan of photos.csv, the one over every row: how many rows each photo id has and whether one is bad.

        A photo id on one valid row (nearly all of an export) is settled here, as ``single_observation``; only
        the others (``photo_ids.photo_id`` where not ``single``: several rows, or a bad one) and the rows without
        a photo id are looked at again, in :meth:`photos`. Keeping one count and one flag per photo id is what
        makes this aggregate over every photo id cheap: carrying the observations, attributes and details of
        every photo through it instead cost more than reading the file twice (bench/README.md)."""
        f = self.files["photos"]
        self.sql(f"""
            CREATE TABLE photo_ids AS
            WITH per_id AS (
                SELECT photo_id, count(*) AS n_rows, bool_or(issue IS NOT NULL) AS bad
                FROM (SELECT {f.typed('photo_id')} AS photo_id, {f.issue()} AS issue FROM {f.rows()})
                GROUP BY photo_id
            ), settled AS (
                SELECT *, photo_id IS NOT NULL AND n_rows = 1 AND NOT bad AS single FROM per_id
            )
            SELECT CASE WHEN single THEN NULL ELSE photo_id END AS photo_id, single, count(*) AS n_ids,
                   sum(n_rows)::BIGINT AS n_rows
            FROM settled GROUP BY ALL
        """)

    def photos(self) -> None:
        """Every photo id's rows: how many observations, how many bad or duplicate rows, whether they agree, and a
        candidate's details (uuid, observer, license, size). One row per photo id in ``photo_groups``, except the
        photos on one observation, which share one row (``photo_id`` null, ``n_ids`` of them); the rows without a
        photo id have a row of their own (both ``photo_id`` and ``outcome`` null).

        Second scan of photos.csv: only the rows of the photo ids :meth:`photo_ids` did not settle are kept
        (whole rows, checked and aggregated as the first scan did), the file's other rows are dropped as soon as
        their photo id is read. A photo id's distinct observations among its valid rows are its observations;
        its valid rows beyond those are duplicates (a ``(photo_id, observation)`` row seen twice)."""
        f = self.files["photos"]
        valid = "FILTER (issue IS NULL)"
        details = ("photo_uuid", "observer_id", "extension", "license", "width", "height")
        photo_id = f'TRY_CAST("photo_id" AS {inat_export.SQL_TYPES["photo_id"]})'
        self.sql(f"""
            CREATE TABLE photo_groups AS
            WITH rows AS (
                SELECT {f.typed('photo_id')} AS photo_id, {f.typed('observation_uuid')} AS observation_uuid,
                       {f.issue()} AS issue, hash(observer_id, license, extension) AS attrs,
                       {f.typed('photo_uuid')} AS photo_uuid, {f.typed('observer_id')} AS observer_id, extension,
                       license, {f.typed('width')} AS width, {f.typed('height')} AS height
                -- The lines the first scan rejected (and counted) are skipped here.
                FROM {f.rows(record_rejects=False, where=f"{photo_id} IS NULL OR {photo_id} IN (SELECT photo_id "
                                                         "FROM photo_ids WHERE photo_id IS NOT NULL)")}
            ), groups AS (
                SELECT photo_id, count(*) AS n_rows,
                       count(*) FILTER (issue = 'missing_fields') AS n_missing,
                       count(*) FILTER (issue = 'invalid_value') AS n_invalid,
                       count(*) {valid} AS n_valid, count(DISTINCT observation_uuid) {valid} AS n_observations,
                       min(observation_uuid) {valid} AS obs_a, max(observation_uuid) {valid} AS obs_b,
                       min(attrs) {valid} AS attrs_min, max(attrs) {valid} AS attrs_max,
                       min(photo_uuid) AS photo_uuid, min(observer_id) AS observer_id, min(extension) AS extension,
                       min(license) AS license, max(width) AS width, max(height) AS height
                FROM rows GROUP BY photo_id
            ), judged AS (
                SELECT photo_id, CASE WHEN photo_id IS NOT NULL THEN {case_sql(GROUP_CHECKS)} END AS outcome,
                       1 AS n_ids, n_rows, n_missing, n_invalid, n_valid - n_observations AS n_duplicate, obs_a,
                       obs_b, {", ".join(details)}
                FROM groups
                UNION ALL
                SELECT NULL, 'single_observation', n_ids, n_rows, 0, 0, 0, NULL, NULL, {", ".join(["NULL"] * 6)}
                FROM photo_ids WHERE single
            )
            -- Photos on one observation (nearly all of an export) are only counted: one row for all of them.
            SELECT CASE WHEN outcome = 'single_observation' THEN NULL ELSE photo_id END AS photo_id, outcome,
                   sum(n_ids)::BIGINT AS n_ids, sum(n_rows)::BIGINT AS n_rows, sum(n_missing)::BIGINT AS n_missing,
                   sum(n_invalid)::BIGINT AS n_invalid, sum(n_duplicate)::BIGINT AS n_duplicate,
                   min(obs_a) AS obs_a, min(obs_b) AS obs_b,
                   {", ".join(f"min({c}) FILTER (photo_id IS NOT NULL AND outcome IS NULL) AS {c}" for c in details)}
            FROM judged GROUP BY ALL
        """)
        # coalesce: a sum over no rows is NULL (an export with no photo on a single observation, or no other).
        seen, again = self.one("SELECT (SELECT coalesce(sum(n_rows), 0) FROM photo_ids WHERE NOT single), "
                               "(SELECT coalesce(sum(n_rows), 0) FROM photo_groups) "
                               "- (SELECT coalesce(sum(n_rows), 0) FROM photo_ids WHERE single)")
        if seen != again:  # both scans must apply the same checks to the same lines
            raise AssertionError(f"the second scan of photos.csv read {again} rows of unsettled photo ids, not {seen}")
        rejected = self._count_rejects("photos")
        n_rows, missing, invalid, duplicate = self.one(
            "SELECT sum(n_rows), sum(n_missing), sum(n_invalid), sum(n_duplicate) FROM photo_groups")
        self.rows_read["photos"] = int(n_rows or 0) + rejected
        for reason, n in (("missing_fields", missing), ("invalid_value", invalid), ("duplicate_row", duplicate)):
            self.row_issues["photos"][reason] += int(n or 0)

    def candidates(self) -> None:
        """The photos on exactly two observations, with their details, and how many photos share their pair."""
        self.sql("""
            CREATE TABLE candidates AS
            SELECT photo_id, obs_a, obs_b, photo_uuid, observer_id, extension, license, width, height,
                   count(*) OVER (PARTITION BY obs_a, obs_b) AS n_sharing
            FROM photo_groups WHERE photo_id IS NOT NULL AND outcome IS NULL
        """)

    def observations(self) -> None:
        """One scan: row counts by issue for the whole file (rows of ``observation_groups`` without a uuid), and
        the rows of the candidates' observations, grouped by uuid and issue. The scan feeds both aggregates; only
        the candidates' rows (found by a semi-join on the uuid) reach the second."""
        f = self.files["observations"]
        values = {
            "observer_id": f.typed("observer_id"), "taxon_id": f.typed("taxon_id"),
            "quality_grade": '"quality_grade"', "latitude": f.typed("latitude"), "longitude": f.typed("longitude"),
            "positional_accuracy": f.typed("positional_accuracy"), "observed_on": f.typed("observed_on"),
        }
        self.sql(f"""
            CREATE TABLE observation_groups AS
            WITH wanted AS (SELECT obs_a AS uuid FROM candidates UNION SELECT obs_b FROM candidates),
            rows AS (
                SELECT {f.typed('observation_uuid')} AS uuid, {f.issue()} AS issue,
                       {", ".join(f"{sql} AS {name}" for name, sql in values.items())}
                FROM {f.rows()}
            )
            SELECT NULL::UUID AS observation_uuid, issue, count(*) AS n,
                   {", ".join(f"NULL AS {name}" for name in values)}
            FROM rows GROUP BY issue
            UNION ALL
            SELECT uuid, issue, count(*), {", ".join(f"min({name})" for name in values)}
            FROM rows WHERE uuid IN (SELECT uuid FROM wanted) GROUP BY ALL
        """)
        self._tally("observations", "SELECT issue, sum(n) FROM observation_groups WHERE observation_uuid IS NULL "
                                    "GROUP BY ALL")
        self.sql(f"""
            CREATE TABLE observations_found AS
            SELECT observation_uuid, sum(n)::BIGINT AS n, bool_or(issue IS NOT NULL) AS bad,
                   {", ".join(f"min({name}) FILTER (issue IS NULL) AS {name}" for name in values)}
            FROM observation_groups WHERE observation_uuid IS NOT NULL GROUP BY observation_uuid
        """)

    def taxa(self) -> None:
        """The whole taxa file (the ancestors of any taxon may be anywhere in it), checked row by row."""
        f = self.files["taxa"]
        self.sql(f"""
            CREATE TABLE taxa_rows AS
            SELECT {f.typed('taxon_id')} AS taxon_id, ancestry, lower(trim(rank)) AS rank, name,
                   {f.typed('active')} AS active, {f.issue()} AS issue
            FROM {f.rows()}
        """)
        self._tally("taxa", "SELECT issue, count(*) FROM taxa_rows GROUP BY ALL")
        self.sql("""
            CREATE TABLE taxa AS
            WITH usable AS (SELECT * FROM taxa_rows WHERE issue IS NULL OR issue = 'malformed_ancestry'),
            repeated AS (SELECT taxon_id, count(*) AS n FROM usable GROUP BY taxon_id HAVING count(*) > 1)
            SELECT taxon_id, ancestry, rank, name, active, issue IS NOT NULL AS malformed
            FROM usable WHERE taxon_id NOT IN (SELECT taxon_id FROM repeated)
        """)
        duplicates = self.one("SELECT sum(n - 1) FROM (SELECT count(*) AS n FROM taxa_rows "
                              "WHERE issue IS NULL OR issue = 'malformed_ancestry' GROUP BY taxon_id "
                              "HAVING count(*) > 1)")[0]
        if duplicates:
            self.row_issues["taxa"]["duplicate_taxon_id"] += int(duplicates)

    def lineages(self) -> None:
        """The seven ranks of every taxon the candidates' observations are on, from its ancestry, with the
        checks of :data:`TAXON_CHECKS`."""
        per_rank = ",\n".join(
            f"count(*) FILTER (rank = '{c}') AS n_{c}, max(name) FILTER (rank = '{c}') AS name_{c}, "
            f"max(ancestor_id) FILTER (rank = '{c}') AS id_{c}" for c in RANK_COLUMNS
        )
        self.sql(f"""
            CREATE TABLE lineages AS
            WITH need AS (SELECT DISTINCT taxon_id FROM observations_found WHERE taxon_id IS NOT NULL),
            self AS (
                SELECT t.*, CASE WHEN t.ancestry IS NULL THEN []::VARCHAR[] ELSE string_split(t.ancestry, '/') END
                       AS parts
                FROM taxa t JOIN need USING (taxon_id)
            ),
            steps AS (
                SELECT taxon_id, parts, unnest(parts) AS part, generate_subscripts(parts, 1) AS pos
                FROM self WHERE NOT malformed
            ),
            chain AS (
                SELECT s.taxon_id, a.taxon_id AS ancestor_id, a.rank, a.name, a.active, a.malformed,
                       a.taxon_id IS NULL AS missing,
                       a.taxon_id IS NOT NULL AND a.ancestry IS DISTINCT FROM
                           nullif(array_to_string(s.parts[1:s.pos - 1], '/'), '') AS stale,
                       false AS is_self
                FROM steps s LEFT JOIN taxa a ON a.taxon_id = TRY_CAST(s.part AS BIGINT)
                UNION ALL
                SELECT taxon_id, taxon_id, rank, name, active, malformed, false, false, true FROM self
            ),
            per_taxon AS (
                SELECT taxon_id, bool_or(malformed) AS any_malformed, bool_or(missing) AS any_missing,
                       bool_or(NOT active AND NOT is_self) AS inactive_ancestor, bool_or(stale) AS any_stale,
                       bool_and(active) FILTER (is_self) AS self_active,
                       {per_rank}
                FROM chain GROUP BY taxon_id
            )
            SELECT *, {case_sql(TAXON_CHECKS)} AS status FROM per_taxon
        """)

    def observers(self) -> None:
        """One scan: row counts by issue, observers without a name, repeated observer ids, and the candidates'
        observers. An id on several valid rows is counted (``duplicate_observer_id``, the rows beyond the
        first) and resolved to one whole row, the least by (login, name), whatever the file order."""
        f = self.files["observers"]
        self.sql(f"""
            CREATE TABLE observer_rows AS
            SELECT {f.typed('observer_id')} AS observer_id, login, name, {f.issue()} AS issue
            FROM {f.rows()}
        """)
        self.sql("""
            CREATE TABLE observer_groups AS
            WITH wanted AS (SELECT DISTINCT observer_id FROM candidates)
            SELECT w.observer_id, r.issue, count(*) AS n,
                   count(*) FILTER (nullif(trim(r.name), '') IS NULL OR trim(r.name) = 'None') AS n_without_name,
                   min({'login': r.login, 'name': r.name}) FILTER (w.observer_id IS NOT NULL) AS entry
            FROM observer_rows r LEFT JOIN wanted w ON w.observer_id = r.observer_id
            GROUP BY ALL
        """)
        rejected = self._count_rejects("observers")
        total, without_name = rejected, 0
        for issue, n, n_without_name in self.sql(
                "SELECT issue, sum(n), sum(n_without_name) FROM observer_groups GROUP BY ALL").fetchall():
            total += int(n)
            if issue is not None:
                self.row_issues["observers"][issue] += int(n)
            else:
                without_name += int(n_without_name)
        self.rows_read["observers"] = total
        self.notes["observers_without_name"] = without_name
        repeated, conflicting = self.one("""
            SELECT coalesce(sum(n - 1), 0), count(*) FILTER (n_distinct > 1) FROM (
                SELECT observer_id, count(*) AS n, count(DISTINCT {'login': login, 'name': name}) AS n_distinct
                FROM observer_rows WHERE issue IS NULL GROUP BY observer_id HAVING count(*) > 1)
        """)
        if repeated:
            self.row_issues["observers"]["duplicate_observer_id"] += int(repeated)
        self.notes["observer_ids_on_disagreeing_rows"] = int(conflicting)
        rows = self.sql("SELECT observer_id, min(entry).login, min(entry).name FROM observer_groups "
                        "WHERE observer_id IS NOT NULL AND issue IS NULL GROUP BY ALL ORDER BY 1").fetchall()
        names = [(i, login, name, inat_export.attribution_name(login, name)) for i, login, name in rows]
        self.con.register("observer_names_arrow", pa.table({
            "observer_id": pa.array([n[0] for n in names], pa.int64()),
            "login": pa.array([n[1] for n in names], pa.string()),
            "name": pa.array([n[2] for n in names], pa.string()),
            "display_name": pa.array([n[3] for n in names], pa.string()),
            "from_login": pa.array([n[3] is not None and n[3] != (n[2] or "").strip() for n in names], pa.bool_()),
        }))
        self.sql("CREATE TABLE observer_names AS SELECT * FROM observer_names_arrow")

    def licenses(self) -> None:
        """Each distinct license text of the candidates, parsed once in Python."""
        from cladebench.curate.sources.values import parse_license

        raws = [r[0] for r in self.sql("SELECT DISTINCT license FROM candidates ORDER BY 1").fetchall()]
        parsed = [parse_license(r) for r in raws]
        self.con.register("licenses_arrow", pa.table({
            "raw": pa.array(raws, pa.string()),
            "code": pa.array([p.code if p else None for p in parsed], pa.string()),
            "link": pa.array([p.link if p else None for p in parsed], pa.string()),
        }))
        self.sql("CREATE TABLE licenses AS SELECT * FROM licenses_arrow")

    def evaluate(self, excluded: bool, tol: bool) -> None:
        """Every candidate's outcome (null when eligible), and what a row of the dataset needs."""
        sides, organism_columns, divergence, key_a, key_b = _evaluate_parts(tol)
        exclusion = "excluded" if excluded else "(SELECT NULL::BIGINT AS value WHERE false)"
        self.sql(f"""
            CREATE TABLE evaluated AS
            SELECT c.photo_id, c.photo_uuid, c.observer_id, c.extension, c.license, c.width, c.height,
                   c.n_sharing, lic.code AS license_code, lic.link AS license_link,
                   u.login AS observer_login, u.display_name AS observer_name, u.from_login,
                   {case_sql(PHOTO_CHECKS[len(GROUP_CHECKS):])} AS outcome,
                   {divergence} AS rank_index,
                   {key_a} <= {key_b} AS a_first,
                   {", ".join(organism_columns)}
            FROM candidates c {"".join(sides)}
            LEFT JOIN licenses lic ON lic.raw = c.license
            LEFT JOIN (SELECT value AS photo_id FROM {exclusion}) x ON x.photo_id = c.photo_id
            LEFT JOIN observer_names u ON u.observer_id = c.observer_id
        """)

    def outcomes(self) -> dict[str, int]:
        """Photo ids per outcome, before sampling; ``None`` is the eligible ones."""
        counts: Counter[str] = Counter()
        for outcome, n in self.sql("SELECT outcome, sum(n_ids) FROM photo_groups WHERE outcome IS NOT NULL "
                                   "GROUP BY ALL").fetchall():
            counts[outcome] += int(n)
        for outcome, n in self.sql("SELECT coalesce(outcome, ''), count(*) FROM evaluated GROUP BY ALL").fetchall():
            counts[outcome] += int(n)
        return dict(counts)

    def eligible(self) -> list[tuple[object, ...]]:
        """The eligible photos with what sampling needs, in a fixed order."""
        pairs = self._pair_expressions()
        return self.sql(f"""
            SELECT photo_id, rank_index, {pairs['kingdom']} AS kingdom_pair, {pairs['class']} AS class_pair,
                   species_a, species_b, observer_id, md5(concat({int(self.config.seed)}, ':', photo_id)) AS key
            FROM evaluated WHERE outcome IS NULL
            ORDER BY rank_index, kingdom_pair, class_pair, key, photo_id
        """).fetchall()

    @staticmethod
    def _pair_expressions() -> dict[str, str]:
        return {rank: (f"CASE WHEN a_first THEN concat({rank}_a, ' + ', {rank}_b) "
                       f"ELSE concat({rank}_b, ' + ', {rank}_a) END") for rank in ("kingdom", "class")}

    def dropped(self, sampling: Mapping[int, str]) -> pa.Table:
        """Photo id and reason of every photo on two or more observations that is not in the dataset."""
        self.con.register("sampling_arrow", pa.table({
            "photo_id": pa.array(list(sampling), pa.int64()), "reason": pa.array(list(sampling.values()), pa.string()),
        }))
        return self.sql("""
            SELECT photo_id, outcome AS reason FROM photo_groups
            WHERE photo_id IS NOT NULL AND outcome IS NOT NULL AND outcome <> 'single_observation'
            UNION ALL SELECT photo_id, outcome FROM evaluated WHERE outcome IS NOT NULL
            UNION ALL SELECT photo_id, reason FROM sampling_arrow
            ORDER BY reason, photo_id
        """).to_arrow_table()

    def rows(self, selected: Sequence[int]) -> list[dict[str, object]]:
        """The selected photos' evaluated rows, in the order given."""
        self.con.register("selected_arrow", pa.table({
            "photo_id": pa.array(list(selected), pa.int64()), "ord": pa.array(range(len(selected)), pa.int64()),
        }))
        pairs = self._pair_expressions()
        return self.sql(f"""
            SELECT e.*, {pairs['kingdom']} AS kingdom_pair, {pairs['class']} AS class_pair
            FROM evaluated e JOIN selected_arrow s USING (photo_id) ORDER BY s.ord
        """).to_arrow_table().to_pylist()




__all__ = ["Stages"]
