"""The relay: forwards sealed envelopes between peer keys and can open none of them."""
