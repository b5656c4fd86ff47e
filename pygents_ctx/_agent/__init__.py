"""The parts of `pygents_ctx.agent.Agent` kept apart from it.

`state` is what changes while an agent runs, and the checks of its name and
tools; `loading` reads a saved agent, every field checked before it is made.
"""

__all__: list[str] = []
