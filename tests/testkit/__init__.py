"""What tests, the simulator's checks and the benchmarks generate their
material from, and which pixie does not ship: a deterministic sample life
(`samplelife`) and the questions asked of it (`questions`). Run from the
repository (the tests do; so does `./scripts/sample-life`)."""
