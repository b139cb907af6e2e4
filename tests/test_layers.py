"""The import graph is the data flow: the contracts in pyproject.toml ([tool.importlinter]) hold
(make test runs lint-imports), and reading a figure loads no machinery."""

import subprocess
import sys
from pathlib import Path


def test_reading_the_results_loads_no_runner_server_or_driver():
    code = ("import sys, arena.results.aggregate, arena.results.answer, arena.results.store; "
            "print(sorted(m for m in sys.modules if m.startswith('arena')))")
    loaded = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    machinery = [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in
                 ("runner", "servers", "drivers", "probe", "services", "topology", "plan", "model")]
    assert machinery == [], machinery


def test_the_experiments_values_load_no_reader_and_no_machinery():
    """plan/experiment.py holds the values (the contract in pyproject.toml says so of its imports):
    loading it loads no file reader, driver, server or service, at run time either."""
    code = "import sys, arena.plan.experiment; print(sorted(m for m in sys.modules if m.startswith('arena')))"
    loaded = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert [m for m in loaded if m in ("arena.plan.parse", "arena.plan.reader") or m.split(".")[1:2] and
            m.split(".")[1] in ("servers", "drivers", "services", "runner", "probe")] == [], loaded


def test_the_layer_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"  # import-linter's command, in this environment
    done = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "6 kept, 0 broken" in done.stdout


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at ``root`` -> the package's modules it imports, at its top or
    inside a function (a lazy import is a dependency all the same), not under ``if TYPE_CHECKING:``
    (annotations only: nothing is imported when it runs). ``from a import b`` names the module a.b
    where there is one, else a."""
    import ast

    base = root.parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(base).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def imported(tree: ast.AST, package: str):
        for node in ast.iter_child_nodes(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from (n for child in node.orelse for n in imported(ast.Module([child], []), package))
                continue
            if isinstance(node, ast.Import):
                yield from (a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                source = ".".join([*parts, *([node.module] if node.module else [])])
                yield from (f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names)
            yield from imported(node, package)

    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = {t for n in imported(ast.parse(path.read_text()), package)
                       if (t := owner(n)) is not None and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_check_finds_a_circle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import C\n")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n    return a\n")
    (pkg / "c.py").write_text("import pkg.sub\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert graph["pkg.sub"] == set() and graph["pkg.c"] == {"pkg.sub"}  # TYPE_CHECKING imports nothing
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_no_module_of_arena_imports_itself_through_others():
    """No import circle between Arena's modules, lazy imports included: each layer's modules import
    downwards only, so any module can be read (and loaded) without those that use it."""
    assert cycles(import_graph(Path(__file__).parents[1] / "src" / "arena")) == []


def test_a_modules_name_says_what_it_holds_once():
    """No two modules of arena share a file name (``__init__.py`` aside), so a name says what, not
    where: the command line's modules are named for their commands and may share a name with the
    engine's (cli/compare.py calls app/compare.py)."""
    from collections import defaultdict

    root = Path(__file__).parents[1] / "src" / "arena"
    where = defaultdict(list)
    for path in root.rglob("*.py"):
        if path.name != "__init__.py" and path.parent.name != "cli":
            where[path.name].append(str(path.relative_to(root)))
    assert {name: places for name, places in where.items() if len(places) > 1} == {}


def test_no_module_of_arena_load_uses_itself_through_others():
    """arena-load's modules (crate::NAME, outside their tests) form no circle either: the response
    parser below the session that reads it, below the requests that use the session."""
    import re

    src = Path(__file__).parents[1] / "crates" / "arena-load" / "src"
    graph = {}
    for path in src.glob("*.rs"):
        code = path.read_text().split("#[cfg(test)]")[0]
        graph[path.stem] = set(re.findall(r"crate::([a-z_]+)", code)) - {path.stem}
    assert {"http", "response", "session"} <= set(graph) and "response" in graph["session"]
    assert cycles(graph) == []


def test_no_module_over_700_lines_and_no_function_over_80():
    """Weight does not gather in a few places: a module of arena over 700 lines, or a function over
    80, is cut where it reads better (a module by role, a function into its named steps)."""
    import ast

    root = Path(__file__).parents[1] / "src" / "arena"
    heavy = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 700:
            heavy.append(f"{path.relative_to(root)}: {len(text.splitlines())} lines")
        heavy += [f"{path.relative_to(root)}:{f.name}: {f.end_lineno - f.lineno + 1} lines"
                  for f in ast.walk(ast.parse(text)) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and f.end_lineno - f.lineno + 1 > 80]
    assert heavy == []
