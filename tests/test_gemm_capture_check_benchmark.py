"""benchmarks/gemm_capture_check.py on the CPU: its table and what it says of the kernels."""
from conftest import load_benchmark


def test_markdown_lists_every_round_and_kernels_that_differ_inside_the_graph():
    bench = load_benchmark("gemm_capture_check")
    rounds = [{"graph_us": 3.5, "call_us": 3.0, "outside_us": 3.1, "flush_in_pairs_us": 82.3, "flush_alone_us": 82.5},
              {"graph_us": 3.4, "call_us": 3.1, "outside_us": 3.2, "flush_in_pairs_us": 81.4, "flush_alone_us": 82.4}]
    rows = [{"phase": "fresh", "m": 44, "n": 5632, "k": 64, "dtype": "bfloat16", "kernels_outside": ["nvjet"],
             "kernels_inside": ["nvjet"], "rounds": rounds},
            {"phase": "fresh", "m": 7, "n": 283, "k": 449, "dtype": "float16", "kernels_outside": ["gemm", "reduce"],
             "kernels_inside": ["gemm"], "rounds": rounds[:1]}]
    text = bench.markdown({"device": {"name": "H100"}, "date": "d", "versions": {"torch": "t", "triton": "r"},
                           "command": "c", "method": bench.METHOD.format(calls=10, compiled="7x283x449"),
                           "rows": rows})
    assert "| fresh | 44 x 5632 x 64 bfloat16 | 2 | 3.4 | 3.1 | 3.2 | 81.4 / 82.4 |" in text
    assert "| fresh | 7 x 283 x 449 float16 | 1 | 3.5 | 3.0 | 3.1 | 82.3 / 82.5 |" in text
    assert "- fresh, 44 x 5632 x 64 bfloat16: ['nvjet']\n" in text  # the same inside: said once
    assert "- fresh, 7 x 283 x 449 float16: ['gemm', 'reduce']; inside: ['gemm']" in text
    assert "compiled an mm of 7x283x449" in text
