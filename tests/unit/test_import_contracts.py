"""The import direction of ARCHITECTURE.md, enforced by import-linter (contracts in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower() or "0 broken" in result.stdout.lower()


def test_the_layers_run_from_the_faces_down_to_core():
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    order = [m.strip() for layer in layers for m in layer.replace("|", ":").split(":")]
    # answering may import retrieval, retrieval never answering; both sit above core, under the faces.
    assert order.index("assistant.api") < order.index("assistant.answering") < order.index("assistant.retrieval")
    assert order.index("assistant.retrieval") < order.index("assistant.core") == len(order) - 1
    assert order.index("assistant.cli") < order.index("assistant.answering")


def test_sessions_are_opened_only_under_core_db():
    """A store writes queries against a Session that `transactional` opens; nothing else opens one.

    Fails when code outside `assistant/core/db/` calls `<db>.session()`, builds a `sessionmaker`, or
    constructs a `Session(...)` / `Connection` of its own (`engine.connect()` / `engine.begin()`).
    """
    import ast

    opened = []
    for root in ("assistant", "ingest", "finetune"):
        for path in sorted((REPO / root).rglob("*.py")):
            if (REPO / "assistant" / "core" / "db") in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                receiver = func.value if isinstance(func, ast.Attribute) else None
                on_engine = isinstance(receiver, ast.Attribute) and receiver.attr == "engine"
                if name in {"session", "sessionmaker", "Session"} or (on_engine and name in {"connect", "begin"}):
                    opened.append(f"{path.relative_to(REPO)}:{node.lineno} {name}()")
    assert opened == [], "SQL sessions opened outside assistant/core/db:\n" + "\n".join(opened)


def test_the_request_side_imports_neither_transformers_nor_peft():
    """Serving (the API app, the composition root, the adapter router and llama.cpp's LoRA path) loads no
    transformers or peft: adapters of the served GGUF run in llama.cpp (issue 39)."""
    code = ("import sys; import assistant.api.app, assistant.composition, assistant.adapters.routing, "
            "assistant.adapters.llama_lora; print(sorted(m for m in ('transformers', 'peft', 'torch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_contract_forbids_peft_and_transformers_to_the_request_side():
    """Issue 39: the import-linter contracts that `test_import_contracts_hold` enforces include peft
    (even indirectly) and transformers (directly) for the modules that answer requests."""
    import tomllib

    importlinter = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert importlinter["include_external_packages"] is True
    forbidden = [c for c in importlinter["contracts"] if c["type"] == "forbidden"]
    request_side = {"assistant.api", "assistant.composition", "assistant.answering", "assistant.adapters"}
    peft = [c for c in forbidden if "peft" in c["forbidden_modules"] and not c.get("allow_indirect_imports")]
    assert peft and request_side <= set(peft[0]["source_modules"])
    transformers = [c for c in forbidden if "transformers" in c["forbidden_modules"]]
    assert transformers and request_side <= set(transformers[0]["source_modules"])
