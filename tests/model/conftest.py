"""The scripted API server, and model adapters pointed at it (the real SDKs, no network)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pygents_ctx import AnthropicModel, OpenAIModel

from .fake_api import FakeAPI


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeAPI]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = await FakeAPI().start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
def openai_model(api: FakeAPI) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=f"{api.url}/v1", api_key="test-key", timeout=5)


@pytest.fixture
def anthropic_model(api: FakeAPI) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=api.url, api_key="test-key", timeout=5)
