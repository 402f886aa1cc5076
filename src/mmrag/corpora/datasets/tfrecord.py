"""TFRecord files of tf.train.(Sequence)Example, read without TensorFlow.

A TFRecord file is a sequence of records: uint64 length, uint32 masked CRC-32C of the length,
the bytes, uint32 masked CRC-32C of the bytes (little-endian). The records are protocol
buffers; this module decodes the few messages of ``tensorflow/core/example/feature.proto``
(Features, Feature, BytesList, FloatList, Int64List, FeatureLists) from the wire format.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from pathlib import Path

_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


class RecordError(ValueError):
    """A truncated or corrupted TFRecord file."""


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecord uses."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC: rotate right by 15 and add a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """One record in TFRecord framing (what TFRecordWriter writes)."""
    length = struct.pack("<Q", len(record))
    return (length + struct.pack("<I", masked_crc(length)) + record
            + struct.pack("<I", masked_crc(record)))


def read_records(path: str | Path, check_data_crc: bool = False) -> Iterator[bytes]:
    """Records of a .tfrecord or .tfrecord.gz file (length CRC always checked).

    The data CRC is pure Python and slow on gigabytes, so it is checked only on request.
    """
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") or ".gz-" in path.name else open
    with opener(path, "rb") as fh:
        n = 0
        while True:
            head = fh.read(12)
            if not head:
                return
            if len(head) < 12:
                raise RecordError(f"{path}: record {n} truncated in its header")
            length, lcrc = struct.unpack("<QI", head)
            if masked_crc(head[:8]) != lcrc:
                raise RecordError(f"{path}: record {n} has a bad length checksum "
                                  f"(not a TFRecord file, or corrupted)")
            data = fh.read(length)
            tail = fh.read(4)
            if len(data) < length or len(tail) < 4:
                raise RecordError(f"{path}: record {n} truncated")
            if check_data_crc and masked_crc(data) != struct.unpack("<I", tail)[0]:
                raise RecordError(f"{path}: record {n} has a bad data checksum")
            n += 1
            yield data


# --------------------------------------------------------------------------- protobuf wire
def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise RecordError("protobuf: truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a message: int for varints, bytes otherwise."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, i = _varint(buf, i)
        elif wt == 1:
            val, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            val, i = buf[i:i + n], i + n
        elif wt == 5:
            val, i = buf[i:i + 4], i + 4
        else:
            raise RecordError(f"protobuf: unsupported wire type {wt}")
        yield num, wt, val


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_feature(buf: bytes) -> list:
    """A tf.train.Feature -> its values: list of bytes, floats or ints."""
    for num, _, val in fields(buf):
        if num == 1:  # BytesList
            return [v for n, _, v in fields(val) if n == 1]
        if num == 2:  # FloatList (packed or not)
            out: list = []
            for n, wt, v in fields(val):
                if n == 1:
                    out.extend(struct.unpack(f"<{len(v) // 4}f", v) if wt == 2
                               else struct.unpack("<f", v))
            return out
        if num == 3:  # Int64List (packed or not)
            out = []
            for n, wt, v in fields(val):
                if n != 1:
                    continue
                if wt == 2:
                    j = 0
                    while j < len(v):
                        x, j = _varint(v, j)
                        out.append(_signed(x))
                else:
                    out.append(_signed(v))
            return out
    return []


def _map_entries(buf: bytes) -> Iterator[tuple[str, bytes]]:
    for num, _, entry in fields(buf):
        if num != 1:
            continue
        key, value = "", b""
        for n, _, v in fields(entry):
            if n == 1:
                key = v.decode("utf-8")
            elif n == 2:
                value = v
        yield key, value


def decode_features(buf: bytes) -> dict[str, list]:
    """tf.train.Features -> {name: values}."""
    return {k: decode_feature(v) for k, v in _map_entries(buf)}


def decode_sequence_example(buf: bytes) -> tuple[dict[str, list], dict[str, list[list]]]:
    """tf.train.SequenceExample -> (context {name: values}, feature_lists {name: [values...]})."""
    context: dict[str, list] = {}
    lists: dict[str, list[list]] = {}
    for num, _, val in fields(buf):
        if num == 1:
            context.update(decode_features(val))
        elif num == 2:
            for key, fl in _map_entries(val):
                lists[key] = [decode_feature(f) for n, _, f in fields(fl) if n == 1]
    return context, lists
