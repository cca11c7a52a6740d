"""Every task's config answers what the evaluation asks of it (:class:`cladebench.tasks.configs.TaskSettings`), so
no module probes a config for a field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.tasks import all_tasks
from cladebench.tasks.configs import RetrievalTaskConfig, TaskSettings, ZeroShotConfig
from cladebench.tasks.fewshot.config import FewShotConfig
from cladebench.tasks.geo.config import GeoPriorConfig
from cladebench.tasks.lineage.config import LineageConfig

SRC = Path(__file__).resolve().parents[2] / "src" / "cladebench"


def test_every_task_s_config_answers_the_evaluation_s_questions() -> None:
    for name, task in all_tasks().items():
        assert issubclass(task.config, TaskSettings), name
        settings = task.config()
        assert settings.where is None and settings.column is None  # every task has both


def test_each_config_answers_for_the_settings_it_has_and_none_for_the_others() -> None:
    zeroshot = ZeroShotConfig(rank="genus", within="class=Aves", candidates="cryptic_group", labels="l.txt")
    assert (zeroshot.label_rank(), zeroshot.clade(), zeroshot.candidates_column(), zeroshot.label_source()) == \
           ("genus", "class=Aves", "cryptic_group", "l.txt")
    assert not zeroshot.tree_of_life_labels() and zeroshot.group_keys() == {} and zeroshot.shot_counts() == ()
    fewshot = FewShotConfig(shots=(5, 1), group_key="observer")
    assert fewshot.shot_counts() == (1, 5) and fewshot.group_keys() == {"--group-key": "observer"}
    assert RetrievalTaskConfig(rank="family").label_rank() == "family"
    geo = GeoPriorConfig(prior_fusion="embedding_sum", prior_location_column="loc_emb_x", prior_dataset="other")
    assert geo.location_embedding() == ("loc_emb_x", True) and geo.prior_fit() == (None, "other")
    assert geo.group_keys() == {"--prior-group-key": "auto"} and geo.clade() is None
    lineage = LineageConfig(lineage_candidates="taxa.csv")
    assert lineage.candidate_lineages() == "taxa.csv" and lineage.label_rank() is None
    assert lineage.location_embedding() == (None, False) and lineage.prior_fit() == (None, None)


def test_a_tree_of_life_label_set_is_told_apart_by_zero_shot_s_own_rule() -> None:
    from cladebench.errors import CladebenchError

    with pytest.raises(CladebenchError):  # a tree-of-life set at a rank it does not hold is refused when asked
        ZeroShotConfig(labels="tree-of-life", rank="genus").tree_of_life_labels()
    assert not GeoPriorConfig(labels="tree-of-life").tree_of_life_labels()  # geo reads it as a file


def test_no_module_probes_a_config_for_a_field() -> None:
    probes = [f"{path.relative_to(SRC)}:{number}" for path in sorted(SRC.rglob("*.py"))
              for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
              if "getattr(settings" in line or "hasattr(settings" in line]
    assert not probes, probes
