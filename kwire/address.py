"""``HostPort``: a broker address as Kafka writes it, ``host:port`` (IPv6 hosts in brackets).

A plain value shared by the broker's configuration (its listeners), the client (where it
connects) and Spark, so it lives in the codec that all of them import. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from hot.errors import InvalidConfigError


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, *, setting: str = "address") -> HostPort:
        host, sep, port_s = text.strip().rpartition(":")
        if not sep or not host:
            raise InvalidConfigError(f"{setting}: expected HOST:PORT, got {text!r}")
        host = host.strip("[]")
        try:
            port = int(port_s)
        except ValueError:
            raise InvalidConfigError(f"{setting}: port {port_s!r} is not a number") from None
        if not 0 <= port <= 65535:
            raise InvalidConfigError(f"{setting}: port {port} out of range 0-65535")
        return cls(host, port)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
