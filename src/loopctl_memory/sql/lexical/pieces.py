"""Which indexed entries hold each piece of one or two code points: persisted masks of short words.

A query word of one or two code points (``a``, ``ca``, ``é``) is inside a
large share of any vocabulary that grows with the store: hex ids alone hold
every hex digit pair. Finding its entries through its tokens means reading
the ids of millions of tokens and then their postings, the first time a
process meets the word. Instead, indexing keeps for each block row (the
seqs ``block <= seq < block + row_entries``) and each *piece* some token of
its entries holds (one code point, or two adjacent ones of a token), which
of the row's entries hold it: one row of ``piece_blocks`` a piece a block row.
A query word of one or two code points is in an entry's memory exactly when
the entry holds it as a piece (a word has no whitespace, so it lies inside
one token), so its entries are the union of its rows: a few hundred bytes a
block, read in one statement.

A row's ``seqs`` is one byte giving its form, then:

* ``0``: a bitmap of the seqs from ``block`` on (bit ``n`` of byte ``n // 8``,
  least significant first), when many of the row's entries hold the piece;
* ``2`` or ``4``: the offsets from ``block`` of the entries holding it, as
  little-endian unsigned integers of that width, ascending.

A piece is one integer: a code point shifted left by 21 bits, then or-ed with
the second code point, or with 0x110000 (no code point) for a piece of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from loopctl_memory.binary32 import WHITE_SPACE
from loopctl_memory.sql.backend import Reader, backend_of

Ints = npt.NDArray[np.int64]
Narrow = npt.NDArray[np.integer[Any]]
Mask = npt.NDArray[np.bool_]

_BITS = 21
_ALONE = 0x110000  # above every code point: the second half of a one-code-point piece
_BITMAP = 0
_ASCII = 128
_ASCII_SLOTS = _ASCII * (_ASCII + 1)  # a piece of ASCII: its first, then its second or none
# Whether each code point up to U+3000 (the last White_Space) is White_Space; one more
# (False) stands for every code point above.
_WHITE = np.zeros(ord(max(WHITE_SPACE)) + 2, np.bool_)
_WHITE[[ord(character) for character in WHITE_SPACE]] = True
_SLOTS = np.arange(_ASCII_SLOTS, dtype=np.int64)
_ASCII_CODES = (_SLOTS // (_ASCII + 1) << _BITS) | np.where(
    _SLOTS % (_ASCII + 1) == _ASCII, _ALONE, _SLOTS % (_ASCII + 1)
)
_CELLS_AT_ONCE = 32 * 2**20  # (piece, entry) cells one pass of a block's pieces marks
_INSERT = "INSERT INTO piece_blocks (piece, block, seqs) VALUES (?, ?, ?)"
_SET_BITS = np.array([bin(byte).count("1") for byte in range(256)], np.int64)


def piece_code(word: str) -> int:
    """The piece a word of one or two code points is."""
    if len(word) == 1:
        return (ord(word) << _BITS) | _ALONE
    return (ord(word[0]) << _BITS) | ord(word[1])


def text_pieces(texts: Sequence[tuple[int, str]]) -> tuple[Ints, Ints]:
    """Every piece of the texts' whitespace tokens, with its seq: (seqs, pieces), repeats kept.

    ``texts``: (seq, lowercase memory), ascending by seq. One code point of a
    token is a piece, and so is every two adjacent ones.
    """
    if not texts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    offsets, slots, codes = _occurrences(texts, texts[0][0])
    return offsets.astype(np.int64) + texts[0][0], codes[slots]


def _occurrences(
    texts: Sequence[tuple[int, str]], block: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint32], Ints]:
    """Each piece occurrence's offset from ``block`` and slot, and the piece of each slot.

    A piece of ASCII code points has its slot by arithmetic (its first code
    point, then its second or none); only the others are sorted, to number
    them after those.
    """
    seqs, memories = zip(*texts, strict=True)
    lengths = np.fromiter(map(len, memories), np.int64, len(memories))
    raw = np.frombuffer("".join(memories).encode("utf-32-le", "surrogatepass"), "<u4")
    inside = ~_WHITE[np.minimum(raw, len(_WHITE) - 1)]  # a token's code point
    paired = inside[:-1] & inside[1:]
    ends = np.cumsum(lengths)[lengths > 0] - 1  # a text's last code point pairs with none
    paired[ends[ends < len(paired)]] = False
    # Offsets from the block in int32: a block row holds at most 2^31 seqs.
    offset_of = np.repeat((np.array(seqs, np.int64) - block).astype(np.int32), lengths)
    # A slot a piece (in uint32: 0x10FFFF * 129 + 0x10FFFF fits): right for ASCII only.
    # Narrow types throughout: these arrays hold every code point of the block, twice.
    slots = np.concatenate(
        (
            raw[inside] * np.uint32(_ASCII + 1) + np.uint32(_ASCII),
            (raw[:-1] * np.uint32(_ASCII + 1) + raw[1:])[paired],
        )
    )
    codes = _ASCII_CODES
    if len(raw) and int(raw.max()) >= _ASCII:
        odd = np.concatenate((raw >= _ASCII, (raw[:-1] >= _ASCII) | (raw[1:] >= _ASCII)))
        odd = odd[np.concatenate((inside, paired))]
        points = raw.astype(np.int64)
        every = np.concatenate(
            ((points[inside] << _BITS) | _ALONE, ((points[:-1] << _BITS) | points[1:])[paired])
        )
        others, inverse = np.unique(every[odd], return_inverse=True)
        slots[odd] = _ASCII_SLOTS + inverse
        codes = np.concatenate((codes, others))
    offsets = np.concatenate((offset_of[inside], offset_of[:-1][paired]))
    return offsets, slots, codes


def piece_rows(
    block: int, texts: Sequence[tuple[int, str]], row_entries: int
) -> list[tuple[int, int, bytes]]:
    """The rows of the texts' pieces (seq, lowercase memory; ascending): one a piece a block row.

    Block rows hold ``row_entries`` seqs each from ``block`` on, like the postings.
    """
    if not texts:
        return []
    offsets, slots, codes = _occurrences(texts, block)
    if not len(slots):
        return []
    row_entries = max(row_entries, 1)
    row_of = offsets // row_entries
    values: list[tuple[int, int, bytes]] = []
    low, high = int(row_of.min()), int(row_of.max())
    for row in range(low, high + 1):
        chosen: npt.NDArray[np.bool_] | slice = slice(None)
        if high > low:
            in_row = row_of == row
            if not in_row.any():
                continue
            chosen = in_row
        first = row * row_entries
        values += _row_values(codes, slots[chosen], offsets[chosen] - first, block + first)
    return values


def insert_rows(connection: Connection, rows: list[tuple[int, int, bytes]]) -> None:
    """Insert rows :func:`piece_rows` made."""
    if rows:
        connection.exec_driver_sql(backend_of(connection).sql(_INSERT), rows)


def _row_values(
    codes: Ints, slots: Narrow, offsets: Narrow, row: int
) -> list[tuple[int, int, bytes]]:
    """The rows of one block row: which offsets hold the piece of each slot (repeats allowed)."""
    span = int(offsets.max()) + 1
    values = []
    held = np.flatnonzero(np.bincount(slots, minlength=len(codes)))
    place = np.zeros(len(codes), np.int64)
    place[held] = np.arange(len(held))
    places = place[slots]  # each occurrence's piece among those the row holds
    step = max(1, _CELLS_AT_ONCE // span)
    for low in range(0, len(held), step):
        chosen = held[low : low + step]
        cells = np.zeros((len(chosen), span), np.bool_)
        flat = cells.reshape(-1)  # one index a cell: faster than a pair of indexes
        if len(chosen) == len(held):
            flat[places * span + offsets] = True
        else:
            inside = (places >= low) & (places < low + step)
            flat[(places[inside] - low) * span + offsets[inside]] = True
        totals = cells.sum(axis=1)
        bitmaps = np.packbits(cells, axis=1, bitorder="little")
        values += [
            (int(codes[slot]), row, _encoded(cells[n], int(totals[n]), bitmaps[n]))
            for n, slot in enumerate(chosen.tolist())
        ]
    return values


def _encoded(cells: npt.NDArray[np.bool_], total: int, bitmap: npt.NDArray[np.uint8]) -> bytes:
    """A row's ``seqs``: a bitmap, or the offsets, whichever is smaller."""
    width = 2 if len(cells) <= 1 << 16 else 4
    if total * width * 8 >= len(cells):
        return bytes((_BITMAP,)) + bitmap.tobytes()
    offsets = np.flatnonzero(cells).astype(f"<u{width}")
    return bytes((width,)) + offsets.tobytes()


def entries_holding(reader: Reader, word: str, through: int) -> Ints | Mask:
    """The indexed entries (``seq <= through``) whose tokens hold ``word``.

    ``word`` has one or two code points. Either their seqs, ascending, or,
    when most of the word's rows are bitmaps (a word many entries hold), a
    mask by seq of ``through + 1`` values: its bitmaps placed as they are,
    with no seq ever listed. Removed entries may be among them.
    """
    rows = reader.all(
        "SELECT block, seqs FROM piece_blocks WHERE piece = ? AND block <= ? ORDER BY block",
        (piece_code(word), through),
    )
    blocks = [int(block) for block, _ in rows]
    packed = [bytes(seqs) for _, seqs in rows]
    if 2 * sum(1 for each in packed if each[0] == _BITMAP) > len(packed):
        return _marked(blocks, packed, through)
    return decoded_rows(np.array(blocks, np.int64), packed)


def _marked(blocks: list[int], rows: list[bytes], through: int) -> Mask:
    """A mask by seq of the entries the rows name (``rows[n]`` of block row ``blocks[n]``)."""
    mask = np.zeros(through + 1, np.bool_)
    for block, packed in zip(blocks, rows, strict=True):
        if packed[0] == _BITMAP:
            unpacked = np.unpackbits(np.frombuffer(packed, np.uint8, offset=1), bitorder="little")
            bits: Mask = unpacked[: through + 1 - block].view(np.bool_)
            # Or-ed, not assigned: a bitmap's last byte may reach into the next block row.
            mask[block : block + len(bits)] |= bits
        else:
            mask[np.frombuffer(packed, f"<u{packed[0]}", offset=1).astype(np.int64) + block] = True
    return mask


def decoded_rows(blocks: Ints, rows: list[bytes]) -> Ints:
    """The seqs the rows name (``rows[n]`` of block row ``blocks[n]``, ascending), ascending.

    Every row of a form at once: a common piece has a row in every block row.
    """
    forms = np.fromiter((packed[0] for packed in rows), np.uint8, len(rows))
    parts: list[Ints] = []
    for form in np.unique(forms).tolist():
        chosen = np.flatnonzero(forms == form)
        joined = np.frombuffer(b"".join(rows[n][1:] for n in chosen.tolist()), np.uint8)
        sizes = np.fromiter((len(rows[n]) - 1 for n in chosen.tolist()), np.int64, len(chosen))
        if form == _BITMAP:
            # Each row's set bits, counted by byte: a row's offsets then start at its block.
            running = np.concatenate(([0], np.cumsum(_SET_BITS[joined])))
            ends = np.cumsum(sizes)
            counts = running[ends] - running[ends - sizes]
            found = np.flatnonzero(np.unpackbits(joined, bitorder="little"))
            firsts = blocks[chosen] - 8 * (ends - sizes)
        else:
            counts = sizes // form
            found = np.frombuffer(joined, f"<u{form}").astype(np.int64)
            firsts = blocks[chosen]
        parts.append(found + np.repeat(firsts, counts))
    if not parts:
        return np.empty(0, np.int64)
    if len(parts) == 1:
        return parts[0]
    return np.sort(np.concatenate(parts))  # each row's seqs lie in its block row: no repeats
