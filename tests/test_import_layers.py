"""The package's folders are layers: a module imports only from its own folder or the folders
below it (docs/DESIGN.md, "Modules"), and no two modules import each other, directly or
around a circle. Read from the source (every ``import``, also those inside functions), nothing
is run.

Checked to fail: run on the tree of b566be0 (before issue 30's moves) it names 10 upward imports
(``analysis/* -> run/samples``, ``distribute/checkpoints -> run/checkpoints``, ``run/mode_search
-> tuning``, ``tuning/stepsize_search -> sgmcmc``, …) and two circles
(``analysis/diagnostics -> run/samples -> analysis/diagnostics``; ``sgmcmc -> tuning ->
stepsize_search -> sgmcmc``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sgmcmc"

#: From the top down. A folder (or top-level module) may import only itself and what is
#: listed after it; the modules on one line of the bottom floor import nothing of each other
#: but ``errors``/``_xla_flags``/``_quiet``/``graph_options``/``data`` (listed in that order below).
LAYERS = [
    "__init__",
    "keras",
    "auto",
    "tuning",
    "api",
    "run",
    "stability",
    "analysis",
    "step",
    "distribute",
    "checks",
    "data",
    "datasets",
    "constraints",
    "tempering",
    "schedules",
    "programs",
    "graph_options",
    "_quiet",
    "_xla_flags",
    "errors",
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[str]:
    """The sgmcmc modules ``path`` imports (absolute dotted names)."""
    own = _module_name(path).split(".")
    package = own if path.name == "__init__.py" else own[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == "sgmcmc"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                if node.module:
                    out.append(".".join(base + [node.module]))
                else:  # from . import x: x may be a module
                    out += [".".join(base + [a.name]) for a in node.names]
            elif node.module and node.module.split(".")[0] == "sgmcmc":
                out.append(node.module)
    return out


def _room(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    names = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        targets = set()
        for module in _imports(path):
            while module not in names and "." in module:  # "from .x import name" of a name
                module = module.rsplit(".", 1)[0]
            targets.add(module)
        graph[_module_name(path)] = targets - {_module_name(path)}
    return graph


def test_every_folder_is_listed():
    rooms = {_room(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert rooms <= set(LAYERS), f"add {sorted(rooms - set(LAYERS))} to LAYERS (where it belongs)"


def test_no_import_runs_upward():
    rank = {room: i for i, room in enumerate(LAYERS)}
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in _graph().items()
        for target in targets
        if _room(source) != _room(target) and rank[_room(target)] < rank[_room(source)]
    )
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_no_circles_between_modules():
    graph = _graph()
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, "circles:\n" + "\n".join(" -> ".join(c) for c in circles)
