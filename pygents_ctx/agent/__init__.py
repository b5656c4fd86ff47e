"""The `Agent`: runs a queue of turns and routes what they produce by type.

`Agent` and `AgentRegistry` are in `_agent`; its parts: the run state
(`_run_state`), the checks of what it is given (`_checks`), agent names and
`AgentScope` (`_names`), branching and merging (`_branching`),
loading a saved agent (`_saved`), and its checkpoints and rewinds (`_checkpoints`).
"""

from pygents_ctx.agent._agent import Agent, AgentRegistry, BranchMerge
from pygents_ctx.agent._checkpoints import Rewind

__all__ = ["Agent", "AgentRegistry", "BranchMerge", "Rewind"]
