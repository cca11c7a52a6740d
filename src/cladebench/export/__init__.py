"""Results where researchers keep them: a LaTeX table for a paper (:mod:`.latex`), the ``model-index`` of a Hugging
Face model card (:mod:`.model_card`), runs of an MLflow tracking server (:mod:`.mlflow_runs`) or of Weights & Biases
(:mod:`.wandb_runs`), both holding what :mod:`.tracked` says a tracker's run holds.

Every format reads the numbers the way ``cladebench results`` reads them, never recomputed: the LaTeX table is the
pivot of the suite's checked table, the others read :func:`.checked.exported_results` (that checked table, or run
records each verified against its predictions); every run left out (skipped, unverified, another model's) is
said. The libraries of a format
(huggingface_hub, mlflow, wandb) are imported only when that format is written.
"""
