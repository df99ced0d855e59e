"""The unit tests' fixtures: the embedder adapters' fake libraries."""

from tests.unit.model_fakes import fe_models, st_models

__all__ = ["fe_models", "st_models"]
