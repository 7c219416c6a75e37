"""The table of table.md from before/ and after/ (pg_shmem_allocations: name, size,
allocated size; bytes per descriptor added beyond the 2,048 slots)."""

from pathlib import Path

HERE = Path(__file__).parent
SLOTS = 2048


def allocs(phase: str, cfg: str) -> dict[str, int]:
    out = {}
    for line in (HERE / phase / f"alloc-{cfg}.txt").read_text().splitlines():
        name, _size, allocated = line.rsplit(" ", 2)
        out[name] = int(allocated)
    return out


def used(a: dict[str, int]) -> int:
    return sum(v for k, v in a.items() if k != "<free>")


def main() -> None:
    plain = allocs("after", "se2-0")
    assert plain == allocs("before", "se2-0")
    rows = []
    for desc, n in (("64MB", 8192), ("256MB", 32768)):
        b, a = allocs("before", f"se2-{desc}"), allocs("after", f"se2-{desc}")
        for name in sorted(set(b) | set(a) | set(plain)):
            p0, b0, a0 = plain.get(name, 0), b.get(name, 0), a.get(name, 0)
            if name != "<free>" and (b0 != p0 or a0 != p0):
                rows.append((desc, name, p0, b0, a0, n))
        rows.append((desc, "**all but free**", used(plain), used(b), used(a), n))
    print(
        "| descriptors | allocation | se2, no hybrid pool | hybrid, before | hybrid, after "
        "| B per added descriptor before / after |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for desc, name, p, b, a, n in rows:
        per_b, per_a = (b - p) / (n - SLOTS), (a - p) / (n - SLOTS)
        print(f"| {desc} | {name} | {p:,} | {b:,} | {a:,} | {per_b:.1f} / {per_a:.1f} |")
    for eng in ("base", "se1", "se2"):
        same = allocs("before", f"{eng}-0") == allocs("after", f"{eng}-0")
        print(f"\n{eng}, shared_buffers 16 MB: allocations before == after: {same}")


if __name__ == "__main__":
    main()
