"""Line breaking for terminal text in any language the rules ship (issue 16).

`textwrap` (and rich) break only at spaces, so a run of Chinese is one "word": a line ends after a
few columns, `KV ⏎ 缓存` splits, a number loses its unit. Here a line may break at a space or
between two characters of which one is Chinese, except where Chinese typography forbids it: never
before `，。；：）` and the like, never after `（`. A number stays with its unit (`79.15 GiB`), a
code span stays whole (unless it is wider than a line by itself), a long token (a path, a flag) is
never cut. Widths are terminal cells: a Chinese character takes two; a glyph of ambiguous East
Asian width (`·`, `→`, `—`) takes two when `wide_ambiguous` (CJK terminals draw it so)."""

from __future__ import annotations

import re
import unicodedata

from kvdoctor._record import record

# no line starts with these (closing punctuation, full-width and ASCII) ...
NO_START = frozenset("，。；：）、！？」』》〉】”’…—,.;:)!?%")
# ... and none ends with these (opening punctuation)
NO_END = frozenset("（「『《〈【“‘(")
# what a number is said in: it stays on the number's line ("79.15 GiB", "8192 个 token")
UNITS = frozenset(
    {"GiB", "MiB", "KiB", "TiB", "GB", "MB", "B", "token", "tokens", "blocks", "bytes", "个", "块", "字节", "行", "次"}
)
_NUMBER_END = re.compile(r"\d[\d.,]*[%x]?$")
_CODE = re.compile(r"`[^`]+`")


def char_width(ch: str, wide_ambiguous: bool = False) -> int:
    if unicodedata.combining(ch):
        return 0
    kind = unicodedata.east_asian_width(ch)
    return 2 if kind in ("W", "F") or (wide_ambiguous and kind == "A") else 1


def cell_width(text: str, wide_ambiguous: bool = False) -> int:
    """Terminal cells `text` takes."""
    return sum(char_width(ch, wide_ambiguous) for ch in text)


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


@record(slots=True)
class _Atom:
    text: str
    space: bool  # a space separates it from the atom before
    breakable: bool  # a line may break before it


def _pieces(word: str) -> list[str]:
    """A space-free word split where a line may break inside it: around each Chinese character."""
    out: list[str] = []
    for ch in word:
        if out and not _wide(ch) and not _wide(out[-1][-1]):
            out[-1] += ch  # a run of Latin letters, digits, ASCII punctuation stays one piece
        else:
            out.append(ch)
    return out


def _glued(before: str, after: str) -> bool:
    """No break between these two pieces (written without a space between them)."""
    if after[0] in NO_START or before[-1] in NO_END:
        return True
    if before[-1] in "/-" or after[0] == "/" or (after[0] == "-" and not after.startswith("--")):
        return True  # 空闲/总量, 编码器-解码器 (but a --flag may start a line)
    if _NUMBER_END.search(before) and after in UNITS:
        return True
    return not (_wide(before[-1]) or _wide(after[0]))


def _words(text: str, room: int, wide_ambiguous: bool) -> list[tuple[str, bool, bool]]:
    """(word, is a whole code span, a space before it): code spans stay one word unless wider
    than `room`, where they break at their spaces like the text around them."""
    out: list[tuple[str, bool, bool]] = []
    space = False

    def plain(segment: str) -> None:
        nonlocal space
        for j, part in enumerate(segment.split(" ")):
            space = space or j > 0
            if part:
                out.append((part, False, space))
                space = False

    pos = 0
    for m in _CODE.finditer(text):
        plain(text[pos : m.start()])
        if cell_width(m.group(0), wide_ambiguous) > room:
            plain(m.group(0))
        else:
            out.append((m.group(0), True, space))
            space = False
        pos = m.end()
    plain(text[pos:])
    return out


def _atoms(text: str, room: int, wide_ambiguous: bool) -> list[_Atom]:
    atoms: list[_Atom] = []
    for word, whole, space in _words(text, room, wide_ambiguous):
        for i, piece in enumerate([word] if whole else _pieces(word)):
            if not atoms:
                atoms.append(_Atom(piece, False, False))
            elif i == 0 and space:
                unit = _NUMBER_END.search(atoms[-1].text) is not None and piece in UNITS
                atoms.append(_Atom(piece, True, not unit and piece[0] not in NO_START))
            else:
                atoms.append(_Atom(piece, False, not _glued(atoms[-1].text, piece)))
    return atoms


def _groups(atoms: list[_Atom]) -> list[tuple[str, bool]]:
    """Atoms joined into the unbreakable groups a line is filled with: (text, space before)."""
    groups: list[tuple[str, bool]] = []
    for atom in atoms:
        if groups and not atom.breakable:
            text, space = groups[-1]
            groups[-1] = (text + (" " if atom.space else "") + atom.text, space)
        else:
            groups.append((atom.text, atom.space))
    return groups


def wrap(text: str, width: int, *, first: int = 0, hang: int = 0, wide_ambiguous: bool = False) -> list[str]:
    """`text` in lines of at most `width` cells. The first line has `first` cells taken already
    (a label printed before it); the others are to be indented by `hang` (not included here)."""
    if not text:
        return [""]
    used, lines, line = first, [], ""
    for group, space in _groups(_atoms(text, width - hang, wide_ambiguous)):
        sep = " " if space and line else ""
        need = cell_width(sep + group, wide_ambiguous)
        if line and used + need > width:
            lines.append(line)
            line, used, sep, need = "", hang, "", cell_width(group, wide_ambiguous)
        line += sep + group
        used += need
    lines.append(line)
    return lines
