"""One module per stack; each composes constructs from fmcluster.constructs."""
