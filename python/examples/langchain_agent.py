"""A LangChain v1 agent whose model calls go through CompactorMiddleware; runs without an API key.

    pip install './python[langchain]'
    python python/examples/langchain_agent.py

The chat model is a scripted stand-in (it reads one large file per call, then answers), so the
example runs offline; with a real model, pass it to ``create_agent`` instead (e.g.
``create_agent("anthropic:claude-sonnet-4-5", tools=[read_file], middleware=[...])``).
Each model call gets a compacted copy of the history (at most ``MAX_TOKENS``; compacted when
over 80% of it, down to about 60%), while the agent's state keeps every message.
"""

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from compactor.langchain import CompactorMiddleware

MAX_TOKENS = 4_000
FILES = 8


@tool
def read_file(path: str) -> str:
    """Read a source file of the project."""
    return "\n".join(f"{i:>4}  let setting_{i} = env::var(\"S{i}\")?;  // {path}" for i in range(120))


middleware = CompactorMiddleware(MAX_TOKENS)


class ScriptedModel(GenericFakeChatModel):
    """Stands in for a chat model: one read_file call per turn, then a final answer. It prints
    what each call received and what the middleware did."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        r = middleware.last_report or {}
        print(
            f"model call: {r.get('messages_before')} messages in the state, {len(messages)} sent; "
            f"{r.get('status')}: {r.get('tokens_before')} -> {r.get('tokens_after')} tokens "
            f"(budget {r.get('budget')})"
        )
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


script = [
    AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": f"src/mod_{i}.rs"}, "id": f"call_{i}"}])
    for i in range(FILES)
]
script.append(AIMessage(f"Read {FILES} files; every setting is read with env::var."))

agent = create_agent(
    ScriptedModel(messages=iter(script)),
    tools=[read_file],
    system_prompt="You are a coding agent.",
    middleware=[middleware],
)
state = agent.invoke({"messages": [{"role": "user", "content": "Read the modules and summarize the settings."}]})
print(f"agent state: {len(state['messages'])} messages (nothing dropped); answer: {state['messages'][-1].content}")
