"""Graph stores: a knowledge graph of entities and relationships, walked breadth first.

`GraphStore` is the contract; `InMemoryGraphStore` keeps a graph in dicts,
`SQLiteGraphStore` and `PostgresGraphStore` keep many graphs in a database
and walk them with a recursive query.
"""

from pygents_ctx.errors import EntityNotFoundError
from pygents_ctx.memory.graph.base import Entity, GraphStore, Relationship, Subgraph
from pygents_ctx.memory.graph.in_memory import InMemoryGraphStore
from pygents_ctx.memory.graph.postgres import PostgresGraphStore
from pygents_ctx.memory.graph.sqlite import SQLiteGraphStore

__all__ = [
    "Entity",
    "EntityNotFoundError",
    "GraphStore",
    "InMemoryGraphStore",
    "PostgresGraphStore",
    "Relationship",
    "SQLiteGraphStore",
    "Subgraph",
]
