"""The paired validation gate: mask assignment, the paired-delta OLS estimator and selection."""
