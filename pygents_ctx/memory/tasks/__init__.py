"""Task boards: per-(conversation, agent) boards of tasks with a checked status machine.

`TaskStore` keeps boards and `TaskBoard` is one of them; `InMemoryTaskStore`,
`SQLiteTaskStore` and `PostgresTaskStore` implement them. Tools reach the
board of the agent that runs them by annotating a `TaskBoard` parameter.
"""

from pygents_ctx.errors import RetryLimitError, TaskNotFoundError, TaskTransitionError
from pygents_ctx.memory.tasks.base import Task, TaskBoard, TaskStatus, TaskStore
from pygents_ctx.memory.tasks.in_memory import InMemoryTaskStore
from pygents_ctx.memory.tasks.postgres import PostgresTaskStore
from pygents_ctx.memory.tasks.sqlite import SQLiteTaskStore

__all__ = [
    "InMemoryTaskStore",
    "PostgresTaskStore",
    "RetryLimitError",
    "SQLiteTaskStore",
    "Task",
    "TaskBoard",
    "TaskNotFoundError",
    "TaskStatus",
    "TaskStore",
    "TaskTransitionError",
]
