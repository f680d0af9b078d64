"""The shape of the code, checked: small modules, no import cycle, the Ray glue in one
package, a pure core without Ray or torch, and no module-level state a campaign could leave
behind. Each check reads the source (ast), so it fails on the commit that breaks the rule."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tuner", "trainables")
MAX_LINES = 500

# The pure core: everything a test, a report or `tuner recommend` needs without a cluster.
PURE = (
    "tuner",
    "tuner.atomic",
    "tuner.budget",
    "tuner.cli",
    "tuner.contract",
    "tuner.cost",
    "tuner.errors",
    "tuner.finish",
    "tuner.front",
    "tuner.live",
    "tuner.outcome",
    "tuner.pareto",
    "tuner.report",
    "tuner.results",
    "tuner.rundir",
    "tuner.space",
    "tuner.spec",
    "tuner.study",
    "tuner.summary",
)

# Module-level caches allowed, and why: each holds a built-in dataset (the same for every
# campaign), loaded once per worker so a reused worker does not load it again per trial.
CACHES_ALLOWED = {
    ("trainables.digits", "_load"),
    ("trainables.tabular", "_load"),
    ("trainables._text", "load_corpus"),
}


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path


MODULES = dict(_modules())


def _imports(name: str, path: Path) -> set[str]:
    """Project modules ``name`` imports, at the top or inside functions (TYPE_CHECKING too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            # `from package import module` imports the module; a name of the package
            # itself (or of a module) is an import of that package (or module).
            targets = [t for t in submodules if t in MODULES] or [base]
        else:
            continue
        for target in targets:
            # The longest project module the import names (a name inside a module counts
            # as that module).
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_no_module_is_over_500_lines() -> None:
    long = {
        name: n
        for name, path in MODULES.items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules by concept: {long}"


def _cycle() -> list[str] | None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_import_cycle_among_the_project_modules() -> None:
    # Every import counts: at the top, inside functions, and under TYPE_CHECKING.
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_cycle_check_finds_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check itself can fail: two modules that import each other are reported.
    real = _imports

    def with_a_loop(name: str, path: Path) -> set[str]:
        extra = {"tuner.contract": {"tuner.atomic"}, "tuner.atomic": {"tuner.contract"}}
        return real(name, path) | extra.get(name, set())

    monkeypatch.setattr(sys.modules[__name__], "_imports", with_a_loop)
    cycle = _cycle()
    assert cycle is not None and {"tuner.atomic", "tuner.contract"} <= set(cycle)


def test_only_the_ray_glue_imports_ray_and_the_service_never_imports_torch() -> None:
    offenders = []
    for name, path in MODULES.items():
        if not name.startswith("tuner"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for module in modules:
                top = module.split(".")[0]
                if top == "torch" or (top == "ray" and not name.startswith("tuner._ray")):
                    offenders.append(f"{name}: {module}")
    assert offenders == []


def test_the_pure_core_imports_neither_ray_nor_torch() -> None:
    code = (
        f"import sys\nimport {', '.join(PURE)}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'torch'}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


_MUTATORS = {
    "append",
    "add",
    "clear",
    "discard",
    "extend",
    "insert",
    "pop",
    "popitem",
    "remove",
    "setdefault",
    "update",
}


def _module_state(name: str, path: Path) -> list[str]:
    """Module-level containers some function changes, ``global`` statements, and caches."""
    tree = ast.parse(path.read_text())
    containers = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is not None
            else []
        )
        value = getattr(node, "value", None)
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set)) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict")
        )
        if mutable:
            containers |= {t.id for t in targets if isinstance(t, ast.Name)}
    found = []
    for func in (
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        for deco in func.decorator_list:
            text = ast.unparse(deco)
            if "cache" in text and (name, func.name) not in CACHES_ALLOWED:
                found.append(f"{name}.{func.name}: @{text}")
        for node in ast.walk(func):
            if isinstance(node, ast.Global):
                found.append(f"{name}.{func.name}: global {', '.join(node.names)}")
            target = None
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                for t in (
                    node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                ):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        target = t.value.id
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and isinstance(node.func.value, ast.Name)
            ):
                target = node.func.value.id
            if target in containers:
                found.append(f"{name}.{func.name}: changes module-level {target}")
    return found


def test_no_module_level_state_that_a_campaign_could_leave_behind() -> None:
    found = [line for name, path in MODULES.items() for line in _module_state(name, path)]
    assert found == [], "pass state in (the campaign object, arguments), not through globals"


def test_the_state_check_finds_a_registry(tmp_path: Path) -> None:
    # The check itself can fail: the shape the old per-campaign registries had is reported.
    source = tmp_path / "registry.py"
    source.write_text(
        "_GUARDS: dict[str, object] = {}\n\n\n"
        "def register(key: str, guard: object) -> None:\n"
        "    _GUARDS[key] = guard\n\n\n"
        "def forget(key: str) -> None:\n"
        "    _GUARDS.pop(key, None)\n"
    )
    assert _module_state("registry", source) == [
        "registry.register: changes module-level _GUARDS",
        "registry.forget: changes module-level _GUARDS",
    ]
