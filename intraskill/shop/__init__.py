"""A ShopSimulator-compatible store that runs offline (environment contract: shopsimulator-paper-aligned-v8)."""
