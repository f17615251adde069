"""Fixtures for API tests that talk to a real server over HTTP with the official openai SDK.

A test module opts in by importing them:
``from tests.sdk_server import api_server, base_url, sdk  # noqa: F401`` — each module gets its own
server (module scope) with its own call log.
"""

import time

import pytest
from openai import OpenAI

from lifecycle.api import serving

from tests.test_api import KEY, make_server, serve


@pytest.fixture(scope="module")
def api_server(loaded, tmp_path_factory):
    return make_server(tmp_path_factory.mktemp("sdk-server"))


@pytest.fixture(scope="module")
def base_url(api_server):
    with serve(api_server) as url:
        # Starting the routes starts the model's loading (until the engine is built); until it
        # is ready every call is a 503, which is not what these tests are about.
        while serving.model_status().state == "loading":
            time.sleep(0.05)
        yield url + "/v1"


@pytest.fixture
def sdk(base_url) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=120)
