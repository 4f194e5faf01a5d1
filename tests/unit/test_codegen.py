from scaler.codegen import stale_files


def test_generated_code_matches_the_proto() -> None:
    assert stale_files() == [], "run: python -m scaler.codegen"
