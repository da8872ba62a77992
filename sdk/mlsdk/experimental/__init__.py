"""Experimental helpers, as MLSDK ships them: APIs that may change between releases."""
