"""Helpers the tests share: local HTTP servers, image bombs, a local Ray. Not tests themselves."""
