"""Random well-typed arr programs and a differential tester (see docs/robustness.md)."""
