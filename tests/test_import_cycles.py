"""No import cycles among the project's source modules (issue 33).

A cycle makes the layer picture lie (two modules that each need the other are one module in
two files) and its import order fragile. Runtime imports (module level or inside a function)
may form no cycle at all. ``TYPE_CHECKING`` imports are read too, as the graph a reader
follows: the only cycle allowed there is ``hot.log``'s Kafka-style split (``Log`` delegates
to one module per duty, each of which types its ``Log`` argument), which never executes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "hot", "tiering", "kwire", "kclient", "broker", "api", "spark", "bench")

# hot.log and the modules it delegates to, each typing its Log argument (TYPE_CHECKING only).
TYPE_ONLY_ALLOWED = frozenset(
    {
        "hot.flush",
        "hot.follower_append",
        "hot.leader_append",
        "hot.log",
        "hot.log_loader",
        "hot.log_start",
        "hot.log_truncation",
        "hot.log_txn",
        "hot.log_write",
    }
)


def _graph(*, type_checking: bool) -> grimp.ImportGraph:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    present = [p for p in PACKAGES if (ROOT / p / "__init__.py").exists()]
    return grimp.build_graph(*present, exclude_type_checking_imports=not type_checking, cache_dir=None)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    imports = graph.find_modules_directly_imported_by
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(imports(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(imports(w)))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_runtime_import_cycle() -> None:
    assert cycles(_graph(type_checking=False)) == []


def test_type_checking_imports_form_only_the_log_split_cycle() -> None:
    unexpected = [c for c in cycles(_graph(type_checking=True)) if not set(c) <= TYPE_ONLY_ALLOWED]
    assert unexpected == []


def test_cycle_finder_finds_a_cycle() -> None:
    class Graph:
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m: str) -> set[str]:
            return self.edges.get(m, set())

    assert cycles(Graph()) == [["a", "b", "c"]]  # type: ignore[arg-type]
