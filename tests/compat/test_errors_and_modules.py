"""The exception classes, and the modules pygents users import from."""

from __future__ import annotations

import importlib

import pytest

from tests.compat.conftest import Impl
from tests.compat.marks import covers

# Each error and the builtins a caller may catch it as (pygents' bases; ours adds more).
BASES = {
    "SafeExecutionError": (Exception,),
    "WrongRunMethodError": (Exception,),
    "TurnTimeoutError": (TimeoutError,),
    "UnregisteredToolError": (KeyError,),
    "UnregisteredAgentError": (KeyError,),
    "UnregisteredHookError": (KeyError,),
    "UnserializableHookError": (ValueError,),
}


@covers(*BASES, "errors")
@pytest.mark.parametrize("name", sorted(BASES))
def test_each_error_can_be_caught_as_its_builtin(impl: Impl, name: str) -> None:
    error = getattr(impl.m, name)

    assert error is getattr(importlib.import_module(f"{impl.name}.errors"), name)
    for base in BASES[name]:
        assert issubclass(error, base)
    with pytest.raises(BASES[name][0]):
        raise error("raised")


@covers("UnserializableHookError", "ContextQueue.to_dict")
def test_a_hook_that_cannot_be_found_by_name_makes_its_owner_unsaveable(impl: Impl) -> None:
    m = impl.m

    def make() -> object:
        async def clashing(*args: object) -> None:
            pass

        return clashing

    m.ContextQueue(limit=1).on_evict(make())
    queue = m.ContextQueue(limit=1)
    queue.on_evict(make())

    with pytest.raises(
        m.UnserializableHookError, match="'clashing' is not the one registered under that name"
    ):
        queue.to_dict()


MODULES = {
    "context": ["ContextItem", "ContextQueue", "ContextPool"],
    "hooks": [
        "Hook",
        "HookMetadata",
        "hook",
        "TurnHook",
        "AgentHook",
        "ToolHook",
        "ContextQueueHook",
        "ContextPoolHook",
    ],
    "registry": ["ToolRegistry", "AgentRegistry", "HookRegistry"],
    "agent": ["Agent"],
    "errors": sorted(BASES),
}


@covers(*MODULES)
@pytest.mark.parametrize("module", sorted(MODULES))
def test_public_names_import_from_the_same_submodules(impl: Impl, module: str) -> None:
    found = importlib.import_module(f"{impl.name}.{module}")

    for name in MODULES[module]:
        assert getattr(found, name) is getattr(impl.m, name), f"{module}.{name}"
