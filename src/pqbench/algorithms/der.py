"""DER read and written by hand, for what asn1crypto cannot parse (post-quantum keys it does not know) or
encode (names and algorithms of drafts)."""

from __future__ import annotations


def tlv(data: bytes, i: int = 0) -> tuple[int, int, int]:
    """(tag, where its content starts, where it ends) of the DER element at i."""
    tag, n = data[i], data[i + 1]
    if n < 0x80:
        return tag, i + 2, i + 2 + n
    k = n & 0x7F
    length = int.from_bytes(data[i + 2:i + 2 + k], "big")
    return tag, i + 2 + k, i + 2 + k + length


def children(data: bytes, start: int, end: int) -> list[bytes]:
    """The raw elements between start and end."""
    out = []
    while start < end:
        _, _, stop = tlv(data, start)
        out.append(data[start:stop])
        start = stop
    return out


def elements(element: bytes) -> list[bytes]:
    """The raw elements inside a constructed element (a SEQUENCE's fields)."""
    return children(element, *tlv(element)[1:])


def content(element: bytes) -> bytes:
    _, start, end = tlv(element)
    return element[start:end]


def header(tag: int, n: int) -> bytes:
    """A DER tag and length."""
    if n < 0x80:
        return bytes([tag, n])
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size
