"""What the evaluation plan decides once and every later step reads: the benchmark a dataset name means, the
dataset opened, the uuid column read (the duplicate check and the fingerprint from one read), and the label set
of each group with its hash (built in the plan, read by the task and the record, never built again)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import lance
import pytest
from lance.dataset import LanceScanner

from cladebench import store
from cladebench.evaluate.configs import FewShotEvalConfig, RetrievalEvalConfig, eval_config
from cladebench.evaluate.plan import plan_eval
from cladebench.evaluate.run import run_eval
from cladebench.store.versions import fingerprint_selecting
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy.lance")


def _counting(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> Counter:
    calls: Counter = Counter()
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _uuid_reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The scans of the dataset that read the uuid column alone (or with the selection beside it); a scan only
    planned (a filter checked against the schema) reads no row and is not counted."""
    scans: dict[int, object] = {}
    planned: set[int] = set()
    scanner, explain = lance.LanceDataset.scanner, LanceScanner.explain_plan

    def recording(self, *args, **kwargs):
        made = scanner(self, *args, **kwargs)
        columns = kwargs.get("columns")
        if columns is not None and "uuid" in set(columns) and set(columns) <= {"uuid", "selected"}:
            scans[id(made)] = made
        return made

    def planning(self, *args, **kwargs):
        planned.add(id(self))
        return explain(self, *args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "scanner", recording)
    monkeypatch.setattr(LanceScanner, "explain_plan", planning)

    class Reads(list):
        def __len__(self) -> int:
            return sum(1 for key in scans if key not in planned)

    return Reads()


def test_a_run_opens_its_dataset_once_and_reads_the_uuid_column_once(toy, tmp_path, monkeypatch):
    opened = _counting(monkeypatch, store, "open_dataset")
    fingerprinted = _counting(monkeypatch, store, "fingerprint")
    reads = _uuid_reads(monkeypatch)
    config = RetrievalEvalConfig(dataset=str(toy), column="emb_toy", out=tmp_path / "run", group_by="none",
                                 where="uuid NOT IN ('u00', 'u01', 'u02', 'u03')")
    record, _ = run_eval(config)
    assert opened["open_dataset"] == 1  # the plan's handle serves the stored column, the task and the record
    assert len(reads) == 1 and fingerprinted["fingerprint"] == 0  # one read: duplicates checked, fingerprint kept
    monkeypatch.undo()
    dataset = store.open_dataset(toy)
    assert record.provenance["dataset"]["fingerprint"] == store.fingerprint(dataset)
    assert record.provenance["rows"]["selected"] == 8
    assert "relevant" in record.provenance["plan"]["without_label_set"]  # retrieval has none, and says why


def test_one_read_gives_the_whole_fingerprint_and_the_selected_uuids(toy):
    dataset = store.open_dataset(toy)
    where = "challenge_group = 'birds' AND uuid != 'u03'"
    whole, selected = fingerprint_selecting(dataset, where)
    assert whole == store.fingerprint(dataset)
    assert selected.to_pylist() == ["u01", "u05", "u07", "u09", "u11"]
    assert fingerprint_selecting(dataset, None)[1].to_pylist() == store.read(dataset, columns=["uuid"]).column(
        0).to_pylist()


def test_eval_config_decides_the_benchmark_once_for_the_plan(toy, tmp_path, monkeypatch):
    from cladebench import benchmarks
    from cladebench.evaluate import plan

    decided = _counting(monkeypatch, benchmarks, "named_benchmark")
    monkeypatch.setattr(plan, "named_benchmark", benchmarks.named_benchmark)
    config = eval_config(dataset=str(toy), out=tmp_path / "run", model="bioclip", group_by="none")
    assert config.task == "zeroshot" and config.is_benchmark is False
    assert plan_eval(config).benchmark is None
    assert decided["named_benchmark"] == 1  # eval_config decided it to choose the task; the plan read that
    decided.clear()
    plan_eval(eval_config(task="zeroshot", dataset=str(toy), out=tmp_path / "run", model="bioclip"))
    assert decided["named_benchmark"] == 1  # a task given: the plan decides, once


def test_tasks_without_a_label_set_say_so_in_the_plan(toy, tmp_path):
    retrieval = plan_eval(RetrievalEvalConfig(dataset=str(toy), column="emb_toy", out=tmp_path / "r"))
    assert retrieval.label_sets == {} and "relevant" in retrieval.without_label_set
    fewshot = plan_eval(FewShotEvalConfig(dataset=str(toy), column="emb_toy", out=tmp_path / "f"))
    assert fewshot.label_sets == {} and "split" in fewshot.without_label_set


# --- the label set: built in the plan, read by the task and the record ---------------------------------------

pytest.importorskip("torch")
pytest.importorskip("open_clip")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> tuple[Path, str, Path]:
    """A small world of two kingdoms (evaluated as two groups), embedded with a tiny model, and a tree-of-life
    backbone."""
    from helpers.tree_of_life_world import write_world

    path, backbone, _ = write_world(tmp_path_factory.mktemp("plan"), tiny_model)
    return path, tiny_model, backbone


def test_the_plan_builds_each_groups_label_set_once_and_the_task_and_record_read_it(world, tmp_path, monkeypatch):
    from cladebench.evaluate.configs import ZeroShotEvalConfig
    from cladebench.tasks import common

    path, model, backbone = world
    config = ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "run", device="cpu",
                                group_by="kingdom")
    plan = plan_eval(config)
    assert len(plan.label_sets) == 2 and set(plan.label_sets) == set(plan.groups)
    assert plan.without_label_set is None
    for planned in plan.label_sets.values():
        assert planned.sha256 == common.label_digest(planned.texts) and len(planned.labels) == len(planned.texts)
    built = _counting(monkeypatch, common, "label_set")
    hashed = _counting(monkeypatch, common, "label_digest")
    record, _ = run_eval(config)
    assert built["label_set"] == 2 and hashed["label_digest"] == 2  # once per group, in the plan
    assert record.provenance["plan"]["without_label_set"] is None
    key = record.provenance["comparability"]["label_sets_sha256"]
    assert key == {group: planned.sha256 for group, planned in plan.label_sets.items()}
    for group, planned in plan.label_sets.items():
        assert record.provenance["label_sets"][group]["labels"] == list(planned.texts)
    tree = plan_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "tree", labels=str(backbone)))
    assert tree.label_sets == {} and "tree-of-life" in tree.without_label_set  # read with the model's vectors


def test_a_row_without_a_vector_keeps_its_taxon_in_the_label_set(world, tmp_path):
    import pyarrow as pa
    import pyarrow.compute as pc

    from cladebench.evaluate.configs import ZeroShotEvalConfig

    path, model, _ = world
    table = store.read(store.open_dataset(path))
    species = table.column("species")
    lost = pc.equal(species, species.drop_null()[0]).fill_null(False)  # every photo of one species failed to embed
    vectors = table.column("emb_tiny")
    table = table.set_column(table.column_names.index("emb_tiny"), table.schema.field("emb_tiny"),
                             pc.if_else(lost, pa.nulls(len(table), vectors.type), vectors))
    store.write_dataset(table, tmp_path / "holes.lance")

    def labels(dataset: Path) -> object:
        plan = plan_eval(ZeroShotEvalConfig(dataset=str(dataset), model=model, out=tmp_path / dataset.stem,
                                            group_by="none"))
        return plan.label_sets[None].sha256

    assert labels(tmp_path / "holes.lance") == labels(path)  # both models' runs would score the same labels
    record, _ = run_eval(ZeroShotEvalConfig(dataset=str(tmp_path / "holes.lance"), model=model,
                                            out=tmp_path / "run", group_by="none", device="cpu"))
    assert record.provenance["label_set"]["labels_sha256"] == labels(path)
    not_predicted = {reason: n for reason, n in record.provenance["rows"]["left_out"].items()
                     if reason.startswith("not predicted")}
    assert list(not_predicted.values()) == [pc.sum(lost).as_py()]  # counted, not scored
