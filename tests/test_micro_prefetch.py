"""Pure logic of ./pgnvm micro prefetch."""

from bench.micro.prefetch import render


def test_render_rows_and_unavailable_variants():
    doc = {
        "results": [
            {
                "variant": "none",
                "available": True,
                "ns_per_line_median": 8.0,
                "ns_per_line_min": 7.5,
                "ns_per_line_max": 9.0,
                "ratio_to_none": 1.0,
            },
            {
                "variant": "m1",
                "available": True,
                "ns_per_line_median": 4.0,
                "ns_per_line_min": 3.9,
                "ns_per_line_max": 4.4,
                "ratio_to_none": 0.5,
                "helper_cpu_ms_median": 12.34,
            },
            {"variant": "m2", "available": False, "reason": "no SMT sibling"},
        ]
    }
    text = render({"4k": doc})
    assert "| 4k | none | 8.00 [7.50-9.00] | 1.00 |  |" in text
    assert "| 4k | m1 | 4.00 [3.90-4.40] | 0.50 | 12.3 |" in text
    assert "| 4k | m2 | not available: no SMT sibling" in text
