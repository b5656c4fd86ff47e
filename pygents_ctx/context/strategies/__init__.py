"""Context strategies: build the window a model sees from the full transcript."""

from pygents_ctx.context.strategies.base import ContextStrategy
from pygents_ctx.context.strategies.budget import FitTokens

__all__ = ["ContextStrategy", "FitTokens"]
