"""The arr front end: parse, check, specialize and lower to StableHLO."""
