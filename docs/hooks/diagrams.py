"""Mermaid's flowcharts and state diagrams, the part of them these docs use, drawn as SVG.

The same ```` ```mermaid ```` text renders on GitHub (which runs mermaid.js) and on the site,
where this module draws it while the site is built: Material would load mermaid.js from a CDN,
and the site must work offline. The layout is layered (Sugiyama's, small): ranks by longest
path once the edges that close a cycle are turned round, a few barycenter sweeps to order each
rank, an edge over several ranks routed through a point in each. Text is monospace, so a
label's width is its length. Same text in, same SVG out.

What it reads: ``flowchart LR|TB|TD`` (``graph`` too) with nodes ``id``, ``id[text]``,
``id(text)``, ``id([text])`` (quotes optional), edges ``a --> b``, ``a -->|text| b``, ``a -.->
b``, ``subgraph id [title]`` ... ``end``; ``stateDiagram-v2`` with ``[*]``, ``a --> b: text``,
``direction LR``; ``%%`` comments; ``<br>`` in text. Anything else is a ``ValueError`` naming
the line, so a diagram this cannot draw fails the site's build instead of showing wrong.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

CHAR = 7.8  # px per character of 13px monospace
LINE = 17.0  # px per line of text
PAD_X, PAD_Y = 12.0, 8.0  # inside a node
GAP_RANK = 40.0  # between two ranks of nodes (a rank of labels between them)
GAP_NODE = 22.0  # between nodes of one rank
TERMINAL = 16.0  # the start and end circles' size


@dataclass
class Node:
    id: str
    lines: list[str]
    shape: str = "box"  # box, round, stadium, start, end; an edge's bend: point, label
    group: int = -1  # index into Graph.groups, -1: none
    rank: int = 0
    order: float = 0.0
    x: float = 0.0  # centre
    y: float = 0.0
    loop: list[str] = field(default_factory=list)  # the label of an edge to itself
    ports: int = 0  # most edges on one side: the side is long enough to keep them apart
    lr: bool = False

    @property
    def size(self) -> tuple[float, float]:
        """What is drawn: width and height."""
        if self.shape in ("start", "end"):
            return TERMINAL, TERMINAL
        if self.shape == "point":
            return 0.0, 0.0
        pad = (4.0, 2.0) if self.shape == "label" else (PAD_X, PAD_Y)
        width = max((len(line) for line in self.lines), default=0) * CHAR + 2 * pad[0]
        height = len(self.lines) * LINE + 2 * pad[1]
        if self.lr:
            return width, max(height, 8.0 * self.ports)
        return max(width, 14.0 * self.ports), height

    @property
    def room(self) -> tuple[float, float]:
        """What the layout keeps free for it: its size, and its loop and that loop's label
        (on both sides, so that it stays centred)."""
        w, h = self.size
        if not self.loop:
            return w, h
        label = max((len(s) for s in self.loop), default=0) * CHAR
        return w + 2 * (label + 44), h + 2 * (len(self.loop) * LINE + 34)


@dataclass
class Edge:
    src: str
    dst: str
    lines: list[str]
    dotted: bool = False
    points: list[str] = field(default_factory=list)  # the bends, in order from src


@dataclass
class Group:
    id: str
    title: str


@dataclass
class Graph:
    direction: str = "TB"
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


# --- reading ------------------------------------------------------------------------------------

_SHAPES = (("([", "])", "stadium"), ("[", "]", "box"), ("(", ")", "round"))
_NODE = re.compile(r"^([A-Za-z_][\w-]*)\s*(\(\[.*?\]\)|\[.*?\]|\(.*?\))?")
_FLOW_EDGE = re.compile(r"\s*(-->|-\.->)\s*(?:\|([^|]*)\|\s*)?")


def _text(raw: str) -> list[str]:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        raw = raw[1:-1]
    return [html.unescape(part.strip()) for part in re.split(r"<br\s*/?>", raw)]


def _node(graph: Graph, token: str, group: int, where: str) -> tuple[str, str]:
    """The node ``token`` starts with (declared or updated), and the rest of ``token``."""
    match = _NODE.match(token)
    if not match:
        raise ValueError(f"{where}: expected a node, got {token!r}")
    name, shaped = match.groups()
    node = graph.nodes.setdefault(name, Node(name, [name], group=group))
    if shaped:
        for opening, closing, shape in _SHAPES:
            if shaped.startswith(opening) and shaped.endswith(closing):
                node.lines, node.shape = _text(shaped[len(opening) : -len(closing)]), shape
                break
    if group >= 0 and node.group < 0:
        node.group = group
    return name, token[match.end() :]


def _flowchart(graph: Graph, lines: list[tuple[int, str]]) -> None:
    stack: list[int] = []
    for number, line in lines:
        where = f"line {number}"
        if m := re.fullmatch(r"subgraph\s+([\w-]+)\s*(?:\[(.*)\])?", line):
            graph.groups.append(Group(m[1], " ".join(_text(m[2] or m[1]))))
            stack.append(len(graph.groups) - 1)
            continue
        if line == "end":
            if not stack:
                raise ValueError(f"{where}: `end` without `subgraph`")
            stack.pop()
            continue
        group = stack[-1] if stack else -1
        src, rest = _node(graph, line, group, where)
        while rest.strip():
            m = _FLOW_EDGE.match(rest)
            if not m:
                raise ValueError(f"{where}: cannot read {rest.strip()!r}")
            dst, rest = _node(graph, rest[m.end() :], group, where)
            graph.edges.append(Edge(src, dst, _text(m[2] or "") if m[2] else [], m[1] == "-.->"))
            src = dst
    if stack:
        raise ValueError("a `subgraph` has no `end`")


def _state(graph: Graph, lines: list[tuple[int, str]]) -> None:
    for number, line in lines:
        if m := re.fullmatch(r"direction\s+(LR|TB|TD)", line):
            graph.direction = "LR" if m[1] == "LR" else "TB"
            continue
        m = re.fullmatch(r"(\[\*\]|[\w-]+)\s*-->\s*(\[\*\]|[\w-]+)\s*(?::\s*(.*))?", line)
        if not m:
            raise ValueError(f"line {number}: cannot read {line!r}")
        src, dst = ("start" if m[1] == "[*]" else m[1]), ("end" if m[2] == "[*]" else m[2])
        for name in (src, dst):
            if name in ("start", "end"):
                graph.nodes.setdefault(name, Node(name, [], shape=name))
            else:
                graph.nodes.setdefault(name, Node(name, [name], shape="round"))
        graph.edges.append(Edge(src, dst, _text(m[3]) if m[3] else []))


def parse(text: str) -> Graph:
    """The graph a mermaid flowchart or state diagram describes."""
    lines = [
        (n, line.strip())
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith("%%")
    ]
    if not lines:
        raise ValueError("an empty diagram")
    (_, head), body = lines[0], lines[1:]
    graph = Graph()
    if m := re.fullmatch(r"(?:flowchart|graph)\s+(LR|TB|TD)", head):
        graph.direction = "LR" if m[1] == "LR" else "TB"
        _flowchart(graph, body)
    elif head == "stateDiagram-v2":
        _state(graph, body)
    else:
        raise ValueError(f"line 1: not a diagram this draws: {head!r}")
    return graph


# --- layout -------------------------------------------------------------------------------------


def _merged(edges: list[Edge]) -> list[Edge]:
    """Edges between the same two nodes in the same direction become one, labels stacked."""
    found: dict[tuple[str, str, bool], Edge] = {}
    for e in edges:
        key = (e.src, e.dst, e.dotted)
        if key in found:
            found[key].lines = [*found[key].lines, *e.lines]
        else:
            found[key] = Edge(e.src, e.dst, list(e.lines), e.dotted)
    return list(found.values())


def _ranks(graph: Graph) -> None:
    """Rank every node: its longest path from a start, once the edges that close a cycle are
    turned round. Ranks are even: an edge's label sits in the odd rank it crosses."""
    out: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for e in graph.edges:
        if e.src != e.dst:
            out[e.src].append(e.dst)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    order: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        for m in out[n]:
            if state.get(m) == 1:
                back.add((n, m))
            elif m not in state:
                visit(m)
        state[n] = 2
        order.append(n)

    starts = [n for n in graph.nodes if graph.nodes[n].shape == "start"]
    for n in [*starts, *graph.nodes]:
        if n not in state:
            visit(n)
    for n in reversed(order):  # a topological order once the back edges are turned round
        for m in out[n]:
            if (n, m) not in back:
                graph.nodes[m].rank = max(graph.nodes[m].rank, graph.nodes[n].rank + 1)
    if "end" in graph.nodes:
        graph.nodes["end"].rank = max(n.rank for n in graph.nodes.values() if n.id != "end") + 1
    for n in graph.nodes.values():
        n.rank *= 2


def _bends(graph: Graph) -> None:
    """A point in every rank an edge crosses, so it goes round the nodes there; the one
    nearest its middle carries its label (and is the label's size)."""
    sides: dict[tuple[str, bool], int] = {}
    for e in graph.edges:
        a, b = graph.nodes[e.src], graph.nodes[e.dst]
        for end, other in ((a, b), (b, a)):
            side = (end.id, other.rank > end.rank)
            sides[side] = sides.get(side, 0) + (a is not b)
    for (name, _), count in sides.items():
        node = graph.nodes[name]
        node.ports, node.lr = max(node.ports, count), graph.direction == "LR"
    for i, e in enumerate(graph.edges):
        if e.src == e.dst:
            graph.nodes[e.src].loop = e.lines
            continue
        low, high = sorted((graph.nodes[e.src].rank, graph.nodes[e.dst].rank))
        crossed = list(range(low + 1, high))
        if graph.nodes[e.src].rank > graph.nodes[e.dst].rank:
            crossed.reverse()
        middle = crossed[len(crossed) // 2] if crossed else None
        for rank in crossed:
            name = f"~{i}.{rank}"
            lines = e.lines if rank == middle else []
            graph.nodes[name] = Node(name, lines, shape="label" if lines else "point", rank=rank)
            e.points.append(name)


def _order(graph: Graph) -> list[list[Node]]:
    ranks: list[list[Node]] = [[] for _ in range(max(n.rank for n in graph.nodes.values()) + 1)]
    for n in graph.nodes.values():
        n.order = len(ranks[n.rank])
        ranks[n.rank].append(n)
    links: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for e in graph.edges:
        chain = [e.src, *e.points, e.dst]
        for a, b in itertools.pairwise(chain):
            links[a].append(b)
            links[b].append(a)
    for n in graph.nodes.values():  # a bend is in the group both its ends are in
        if n.shape in ("point", "label"):
            groups = {graph.nodes[m].group for m in links[n.id]}
            n.group = groups.pop() if len(groups) == 1 else -1

    def sweep(rank: list[Node], towards: int) -> None:
        for n in rank:
            near = [graph.nodes[m].order for m in links[n.id] if graph.nodes[m].rank == towards]
            n.order = sum(near) / len(near) if near else n.order
        rank.sort(key=lambda n: (n.group, n.order))
        for i, n in enumerate(rank):
            n.order = i

    def crossings() -> int:
        pairs = [
            sorted((graph.nodes[a], graph.nodes[b]), key=lambda n: n.rank)
            for a, near in links.items()
            for b in near
            if graph.nodes[b].rank == graph.nodes[a].rank + 1
        ]
        return sum(
            (p[0].order - q[0].order) * (p[1].order - q[1].order) < 0
            for i, p in enumerate(pairs)
            for q in pairs[i + 1 :]
            if p[0].rank == q[0].rank
        )

    best = (crossings(), [list(rank) for rank in ranks])
    for _ in range(8):
        for r in range(1, len(ranks)):
            sweep(ranks[r], r - 1)
        for r in range(len(ranks) - 2, -1, -1):
            sweep(ranks[r], r + 1)
        best = min(best, (crossings(), [list(rank) for rank in ranks]), key=lambda b: b[0])
    for rank in best[1]:
        for i, n in enumerate(rank):
            n.order = i
    return [rank for rank in best[1] if rank]


GROUP_MARGIN = 18.0  # round a group's nodes, and a line for its title


def _place(graph: Graph, ranks: list[list[Node]]) -> tuple[float, float]:
    """Centres for every node; the drawing's width and height. Across the ranks, each group
    (and the nodes in none) has a band of its own, so no group's box holds another's node."""
    lr = graph.direction == "LR"
    main, cross = (0, 1) if lr else (1, 0)
    along = [max((n.room[main] for n in rank), default=0.0) for rank in ranks]
    bands: dict[int, list[list[Node]]] = {}
    for rank in ranks:
        for g in sorted({n.group for n in rank}):
            bands.setdefault(g, []).append([n for n in rank if n.group == g])

    def span(nodes: list[Node]) -> float:
        return sum(n.room[cross] for n in nodes) + GAP_NODE * (len(nodes) - 1)

    margin = GROUP_MARGIN + LINE if graph.groups else 8.0
    band_at, at = {}, margin
    for g in sorted(bands):
        band_at[g] = (at, max(span(nodes) for nodes in bands[g]))
        at += band_at[g][1] + (2 * margin if graph.groups else GAP_NODE)
    across = at - (2 * margin if graph.groups else GAP_NODE) + margin
    pos = margin
    for r, rank in enumerate(ranks):
        for g in sorted({n.group for n in rank}):
            nodes = [n for n in rank if n.group == g]
            start, size = band_at[g]
            at = start + (size - span(nodes)) / 2
            for n in nodes:
                centre = (pos + along[r] / 2, at + n.room[cross] / 2)
                n.x, n.y = centre if lr else centre[::-1]
                at += n.room[cross] + GAP_NODE
        pos += along[r] + GAP_RANK / 2
    length = pos - GAP_RANK / 2 + margin
    return (length, across) if lr else (across, length)


# --- drawing ------------------------------------------------------------------------------------


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _lines(lines: list[str], x: float, y: float, cls: str) -> Iterator[str]:
    top = y - (len(lines) - 1) * LINE / 2
    for i, s in enumerate(lines):
        yield (
            f'<text class="{cls}" x="{_fmt(x)}" y="{_fmt(top + i * LINE)}">{html.escape(s)}</text>'
        )


def _label(lines: list[str], x: float, y: float) -> Iterator[str]:
    if lines:
        w, h = max(len(s) for s in lines) * CHAR + 8, len(lines) * LINE + 2
        yield (
            f'<rect class="label" x="{_fmt(x - w / 2)}" y="{_fmt(y - h / 2)}" '
            f'width="{_fmt(w)}" height="{_fmt(h)}" rx="3"/>'
        )
        yield from _lines(lines, x, y, "edge")


def _ports(graph: Graph) -> dict[tuple[int, str], tuple[float, float]]:
    """Where each edge leaves and enters its nodes: spread along the side it uses, in the
    order of where each goes next, so edges do not all meet in one point."""
    lr = graph.direction == "LR"
    sides: dict[tuple[str, bool], list[tuple[float, int, str]]] = {}
    for i, e in enumerate(graph.edges):
        if e.src == e.dst:
            continue
        chain = [graph.nodes[p] for p in (e.src, *e.points, e.dst)]
        for end, near in ((chain[0], chain[1]), (chain[-1], chain[-2])):
            after = near.rank > end.rank  # the side facing the higher ranks
            sides.setdefault((end.id, after), []).append(
                (near.y if lr else near.x, i, "src" if end is chain[0] else "dst")
            )
    found = {}
    for (name, after), ends in sides.items():
        n = graph.nodes[name]
        w, h = n.size
        ends.sort()
        span = (h if lr else w) * 0.6
        for k, (_, i, which) in enumerate(ends):
            offset = (k - (len(ends) - 1) / 2) * (span / max(len(ends) - 1, 1))
            offset = offset if len(ends) > 1 else 0.0
            if lr:
                point = (n.x + (w / 2 if after else -w / 2), n.y + offset)
            else:
                point = (n.x + offset, n.y + (h / 2 if after else -h / 2))
            found[(i, which)] = point
    return found


def _path(points: list[tuple[float, float]], lr: bool) -> str:
    d = f"M{_fmt(points[0][0])},{_fmt(points[0][1])}"
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if lr:
            mx = (x0 + x1) / 2
            d += f" C{_fmt(mx)},{_fmt(y0)} {_fmt(mx)},{_fmt(y1)} {_fmt(x1)},{_fmt(y1)}"
        else:
            my = (y0 + y1) / 2
            d += f" C{_fmt(x0)},{_fmt(my)} {_fmt(x1)},{_fmt(my)} {_fmt(x1)},{_fmt(y1)}"
    return d


def _loop(n: Node, lr: bool) -> tuple[str, tuple[float, float]]:
    """A loop over a node's top (LR) or right side (TB), and where its label goes."""
    w, h = n.size
    if lr:
        x0, x1, y = n.x - 10, n.x + 10, n.y - h / 2
        d = f"M{_fmt(x0)},{_fmt(y)} C{_fmt(x0 - 14)},{_fmt(y - 30)} "
        d += f"{_fmt(x1 + 14)},{_fmt(y - 30)} {_fmt(x1)},{_fmt(y)}"
        return d, (n.x, y - 30 - len(n.loop) * LINE / 2)
    x, y0, y1 = n.x + w / 2, n.y - 8, n.y + 8
    d = f"M{_fmt(x)},{_fmt(y0)} C{_fmt(x + 30)},{_fmt(y0 - 14)} "
    d += f"{_fmt(x + 30)},{_fmt(y1 + 14)} {_fmt(x)},{_fmt(y1)}"
    width = max((len(s) for s in n.loop), default=0) * CHAR
    return d, (x + 36 + width / 2, n.y)


STYLE = """
.node { fill: #e8eaf6; stroke: #3f51b5; stroke-width: 1.3; }
.group { fill: #f5f5f5; stroke: #9e9e9e; stroke-dasharray: 6 4; }
.edge { fill: none; stroke: #546e7a; stroke-width: 1.3; }
.label { fill: #ffffff; fill-opacity: 0.92; }
.terminal { fill: #263238; }
text { font: 13px ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace;
  text-anchor: middle; dominant-baseline: central; fill: #212121; }
text.edge { fill: #37474f; stroke: none; }
text.title { font-weight: bold; fill: #616161; }
"""


def svg(text: str, title: str = "") -> str:
    """The SVG drawing of a mermaid diagram (see the module's docstring for what it reads)."""
    graph = parse(text)
    graph.edges = _merged(graph.edges)
    _ranks(graph)
    _bends(graph)
    width, height = _place(graph, _order(graph))
    lr = graph.direction == "LR"
    uid = "d" + hashlib.sha256(text.encode()).hexdigest()[:8]
    arrow = f"{uid}-arrow"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="kf-diagram" role="img" '
        f'viewBox="0 0 {_fmt(width)} {_fmt(height)}" width="{_fmt(width)}" '
        f'height="{_fmt(height)}">',
        f"<title>{html.escape(title or 'diagram')}</title>",
        f"<style>{' '.join(STYLE.split())}</style>",
        f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#546e7a"/></marker></defs>',
    ]
    for i, group in enumerate(graph.groups):
        members = [n for n in graph.nodes.values() if n.group == i]
        if not members:
            continue
        x0 = min(n.x - n.size[0] / 2 for n in members) - 14
        x1 = max(n.x + n.size[0] / 2 for n in members) + 14
        y0 = min(n.y - n.size[1] / 2 for n in members) - 14 - LINE
        y1 = max(n.y + n.size[1] / 2 for n in members) + 14
        out.append(
            f'<rect class="group" x="{_fmt(x0)}" y="{_fmt(y0)}" width="{_fmt(x1 - x0)}" '
            f'height="{_fmt(y1 - y0)}" rx="6"/>'
        )
        out += _lines([group.title], (x0 + x1) / 2, y0 + LINE / 2 + 4, "title")
    ports = _ports(graph)
    labels = []
    for i, e in enumerate(graph.edges):
        if e.src == e.dst:
            d, at = _loop(graph.nodes[e.src], lr)
            labels += _label(e.lines, *at)
        else:
            chain = [graph.nodes[p] for p in e.points]
            points = [ports[(i, "src")], *((p.x, p.y) for p in chain), ports[(i, "dst")]]
            d = _path(points, lr)
            labels += [t for p in chain for t in _label(p.lines, p.x, p.y)]
        dash = ' stroke-dasharray="5 4"' if e.dotted else ""
        out.append(f'<path class="edge" d="{d}"{dash} marker-end="url(#{arrow})"/>')
    out += labels
    for n in graph.nodes.values():
        w, h = n.size
        if n.shape in ("point", "label"):
            continue
        if n.shape == "start":
            out.append(f'<circle class="terminal" cx="{_fmt(n.x)}" cy="{_fmt(n.y)}" r="7"/>')
            continue
        if n.shape == "end":
            out.append(
                f'<circle class="node" cx="{_fmt(n.x)}" cy="{_fmt(n.y)}" r="8"/>'
                f'<circle class="terminal" cx="{_fmt(n.x)}" cy="{_fmt(n.y)}" r="4.5"/>'
            )
            continue
        radius = {"box": 3.0, "round": 10.0, "stadium": h / 2}[n.shape]
        out.append(
            f'<rect class="node" x="{_fmt(n.x - w / 2)}" y="{_fmt(n.y - h / 2)}" '
            f'width="{_fmt(w)}" height="{_fmt(h)}" rx="{_fmt(radius)}"/>'
        )
        out += _lines(n.lines, n.x, n.y, "node-text")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def fence(source: str, language: str, css_class: str, options: object, md: object,
          **kwargs: object) -> str:  # fmt: skip
    """pymdownx.superfences' formatter for ```` ```mermaid ```` blocks: the drawing, inline."""
    return f'<div class="kf-diagram">{svg(source)}</div>'
