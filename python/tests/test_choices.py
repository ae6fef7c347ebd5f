"""What a newcomer meets first: a choice is taken or refused by name (a zero budget, a preset
that cannot run, LangChain's keywords), errors and reprs are short and name no temporary
file, the type stub and the extras agree with the package, the extension carries no debug
info."""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import pathlib
import struct
import sys
import warnings

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

import compactor
from compactor import _native
from compactor.langchain import CompactorMiddleware, trim_messages

from conftest import CORPUS, ROOT

PAIR = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def history(rounds: int) -> list:
    msgs: list = [SystemMessage("You are a coding agent."), HumanMessage("fix the build")]
    for i in range(rounds):
        msgs.append(AIMessage(content=f"step {i}",
                              tool_calls=[{"id": f"c{i}", "name": "bash", "args": {"cmd": f"make part{i}"}}]))
        msgs.append(ToolMessage(content=f"out {i}\n" * 300, tool_call_id=f"c{i}"))
    msgs.append(AIMessage("all done"))
    msgs.append(HumanMessage("now run the tests"))
    return msgs


@pytest.mark.parametrize("budget", [0, -5])
def test_a_budget_below_one_is_refused_as_the_cli_refuses_it(budget):
    c = compactor.Compactor()
    for call in (lambda: c.compact(PAIR, budget=budget), lambda: c.budget(budget),
                 lambda: compactor.compact(PAIR, budget=budget)):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == (
            f"budget {budget}: a budget is the number of tokens the compacted request may hold "
            "(system prompt, tools and messages); it must be at least 1 (None uses the "
            "configured one)")
    assert c.budget(None) == (180_000, 108_000)
    with pytest.raises(ValueError, match=r"^max_tokens=0: "):
        trim_messages(history(1), max_tokens=0)
    with pytest.raises(ValueError, match=r"^max_tokens=0: "):
        CompactorMiddleware(0)


def test_the_summary_preset_without_an_llm_is_refused_naming_the_key():
    with pytest.raises(compactor.ConfigError) as info:
        compactor.Compactor(strategy="summary")
    assert info.value.key == "llm"
    assert str(info.value).startswith(
        "configuration: llm: the summary tier cannot run: no [llm] configured; add an [llm] section")
    c = compactor.Compactor()
    assert c.skipped_tiers == ["summary tier skipped: no [llm] configured"]


def test_a_config_dict_error_names_the_dict_not_a_temporary_file():
    with pytest.raises(compactor.ConfigError) as info:
        compactor.Compactor({"budget": {"trigger": 2.0}})
    assert str(info.value) == "config dict: configuration: budget.trigger: must be in (0, 1], found 2"
    assert info.value.key == "budget.trigger"
    with pytest.raises(compactor.ConfigError) as info:
        compactor.Compactor({"budget": {"tigger": 0.5}})
    assert str(info.value).startswith("config dict: configuration: ")
    assert "/" not in str(info.value)
    assert compactor.Compactor({"budget": {"tokens": 20_000}}).budget() == (20_000, 12_000)


def test_loaded_and_compacted_have_short_reprs():
    loaded = compactor.load(CORPUS / "codex_rollout_01997e76.jsonl")
    assert repr(loaded) == (
        "Loaded(format='openai-responses', source='codex-rollout', body=a dict of 395 messages)")
    # The rollout's model is the body's.
    assert loaded.body["model"] == "gpt-5-codex"
    result = compactor.compact(loaded.body, budget=30_000)
    assert repr(result) == (
        f"Compacted(status='compacted', tokens {result.report['tokens_before']} -> "
        f"{result.report['tokens_after']}, body=a dict of {len(result.body['input'])} messages, "
        "changed=True)")
    assert len(repr(result)) < 120
    assert repr(compactor.compact(PAIR, budget=1000)) == (
        "Compacted(status='unchanged', tokens 8 -> 8, body=2 messages, changed=False)")


def _stub_signatures() -> dict[str, list[tuple[str, str | None]]]:
    """``name -> [(parameter, default source)]`` of every def in the stub (methods as
    ``Compactor.name``; ``__new__`` as the class itself), ``self``/``cls`` left out."""
    tree = ast.parse(pathlib.Path(_native.__file__).with_name("_native.pyi").read_text())
    out: dict[str, list[tuple[str, str | None]]] = {}

    def params(f: ast.FunctionDef) -> list[tuple[str, str | None]]:
        args = f.args.args
        defaults = [None] * (len(args) - len(f.args.defaults)) + [ast.unparse(d) for d in f.args.defaults]
        return [(a.arg, d) for a, d in zip(args, defaults) if a.arg not in ("self", "cls")]

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = params(node)
        elif isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and not any(
                        isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list):
                    out[node.name if f.name == "__new__" else f"{node.name}.{f.name}"] = params(f)
    return out


def test_the_type_stub_agrees_with_the_native_signatures():
    stub = _stub_signatures()
    assert set(stub) == {"Compactor", "Compactor.compact", "Compactor.count", "Compactor.budget",
                         "Compactor.recall", "validate", "convert", "count", "count_text", "load"}
    for name, expected in stub.items():
        obj = _native
        for part in name.split("."):
            obj = getattr(obj, part)
        runtime = [(p.name, None if p.default is p.empty else repr(p.default))
                   for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        assert runtime == expected, name
    assert set(_native.__all__) == {"Compactor", "validate", "convert", "count", "count_text", "load",
                                    "__version__"}


def test_the_langchain_extra_installs_every_distribution_the_adapter_imports():
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["langchain"]
    names = {req.split(">")[0].split("=")[0].strip() for req in extra}
    # The top-level packages compactor.langchain and CompactorMiddleware import, by distribution.
    imported = {"langchain_core", "langchain"}
    dists = importlib.metadata.packages_distributions()
    needed = {d for module in imported for d in dists[module]}
    assert needed == {"langchain-core", "langchain"}
    assert needed <= names, (needed, names)
    # The middleware class resolves in this environment (langchain's agents are there).
    assert CompactorMiddleware.__name__ == "CompactorMiddleware"


def test_trim_messages_refuses_langchain_keywords_it_cannot_honour_by_name():
    msgs = history(3)
    refusals = {
        "strategy": ("first", "strategy='first': it keeps the oldest messages"),
        "include_system": (False, "include_system=False: compactor always keeps the system message"),
        "allow_partial": (False, "allow_partial=False: compactor shortens oversized tool results"),
        "text_splitter": (str.splitlines, "text_splitter: compactor cuts text itself"),
        "start_on": ("ai", "start_on=ai: after the system message a request starts with the user's"),
        "end_on": ("ai", "end_on=ai: the history ends with a HumanMessage"),
    }
    for keyword, (value, message) in refusals.items():
        with pytest.raises(ValueError) as info:
            trim_messages(msgs, max_tokens=1_000, **{keyword: value})
        assert str(info.value).startswith(message), (keyword, str(info.value))
    with pytest.raises(TypeError):
        trim_messages(msgs, max_tokens=1_000, max_token=5)
    with pytest.raises(TypeError, match="^token_counter: "):
        trim_messages(msgs, max_tokens=1_000, token_counter=12)


def test_trim_messages_honours_the_langchain_keywords_it_can():
    msgs = history(14)
    out = trim_messages(msgs, max_tokens=3_000, strategy="last", include_system=True, allow_partial=True,
                        start_on="human", end_on=(HumanMessage, "tool"), text_splitter=None)
    assert out[0] is msgs[0] and out[-1] is msgs[-1]
    assert isinstance(out[1], HumanMessage)
    assert compactor.validate(compactor.langchain.to_anthropic(out)) == []


def test_trim_messages_counts_max_tokens_with_the_given_token_counter():
    msgs = history(14)
    before = count_tokens_approximately(msgs)
    out = trim_messages(msgs, max_tokens=4_000, token_counter=count_tokens_approximately)
    assert before > 4_000 and count_tokens_approximately(out) <= 4_000
    # "approximate" is the same counter; a per-message counter is summed over the messages.
    assert trim_messages(msgs, max_tokens=4_000, token_counter="approximate") == out

    def per_message(m: BaseMessage) -> int:
        return count_tokens_approximately([m])

    assert count_tokens_approximately(trim_messages(msgs, max_tokens=4_000, token_counter=per_message)) <= 4_000
    # `len` counts messages: at most 12 of them, where compactor's own count would keep 31.
    assert len(trim_messages(msgs, max_tokens=12, token_counter=len)) <= 12
    assert len(trim_messages(msgs, max_tokens=100_000)) == len(msgs)


def test_trim_messages_returns_about_sixty_percent_of_max_tokens_as_documented():
    msgs = history(14)
    c = compactor.Compactor()
    assert c.budget(3_000) == (3_000, 1_800)
    out, report = compactor.langchain.compact_messages(msgs, 3_000, compactor=c)
    assert report["target"] == 1_800 and report["tokens_after"] <= 1_800
    assert "about 60% of ``max_tokens``" in trim_messages.__doc__


def test_a_history_nothing_can_shrink_is_returned_with_a_warning():
    msgs = [SystemMessage("be brief"), HumanMessage("word " * 2_000)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = trim_messages(msgs, max_tokens=100)
    assert out[-1] is msgs[-1]
    assert [str(w.message).split(":")[0] for w in caught] == ["trim_messages"]
    assert "over max_tokens=100" in str(caught[0].message)


def _elf_section_names(path: pathlib.Path) -> list[str]:
    """The section names of a 64-bit little-endian ELF file (the Linux extension module)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    _, str_off, str_size = section(shstrndx)
    strings = data[str_off:str_off + str_size]
    names = []
    for i in range(shnum):
        name = section(i)[0]
        names.append(strings[name:strings.index(b"\0", name)].decode())
    return names


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ELF check reads a Linux build")
def test_the_extension_module_carries_no_debug_info_or_symbol_table():
    path = pathlib.Path(_native.__file__)
    names = _elf_section_names(path)
    assert ".text" in names and ".rodata" in names
    assert [n for n in names if n.startswith(".debug") or n == ".symtab"] == []
