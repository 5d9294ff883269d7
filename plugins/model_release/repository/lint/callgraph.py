"""The dependency graph of a repository (ensemble steps and BLS calls): cycles, depths, load order."""

from __future__ import annotations

import heapq


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with more than one model (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def call_depths(graph: dict[str, list[str]]) -> dict[str, int]:
    """The longest chain of calls below each model (0 for a leaf); cycles are cut."""
    depth: dict[str, int] = {}

    def visit(node: str, path: set[str]) -> int:
        if node in depth:
            return depth[node]
        path.add(node)
        best = 0
        for child in graph[node]:
            if child not in path:
                best = max(best, 1 + visit(child, path))
        path.discard(node)
        depth[node] = best
        return best

    for node in graph:
        visit(node, set())
    return depth


def load_order(graph: dict[str, list[str]]) -> list[str]:
    """Dependencies first, ties by name; models in a cycle come last."""
    waiting = {n: len(deps) for n, deps in graph.items()}
    users: dict[str, list[str]] = {n: [] for n in graph}
    for n, deps in graph.items():
        for d in deps:
            users[d].append(n)
    ready = [n for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for user in users[node]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    order.extend(sorted(n for n in graph if n not in set(order)))
    return order
