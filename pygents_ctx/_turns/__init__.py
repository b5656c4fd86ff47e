"""The parts `pygents_ctx.turns.Turn` is made of, and an agent's queue of turns.

`state` (the fields, checked), `running` and `saving` are the bases of `Turn`;
`steps` drives a run step by step; `lending` and `loading` hold an agent's
queued turns before it has built them (a branch's, a loaded agent's).
"""

__all__: list[str] = []
