"""Results where researchers keep them: a LaTeX table for a paper (:mod:`.latex`), the ``model-index`` of a Hugging
Face model card (:mod:`.model_card`), runs of an MLflow tracking server (:mod:`.mlflow_runs`).

Every format reads one thing, :func:`.checked.exported_results` (a suite folder's checked table or run records
each verified against its predictions), so each number is the one ``cladebench results`` shows, never
recomputed, and every run left out (skipped, unverified, another model's) is said. The libraries of a format
(huggingface_hub, mlflow) are imported only when that format is written.
"""
