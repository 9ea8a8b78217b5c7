"""A buyer on the official x402 Python SDK (PyPI `x402`) paying a route by `exact` on Solana.

Run by test/interop/solana.test.ts. It pays one call to EXACT_URL through the SDK's `requests` integration
with its ExactSvmScheme client, reading the chain at RPC_URL, and prints one JSON object: the status, the
body and the settlement the seller answered.

Environment: BUYER_SECRET_KEY (hex of the 64-byte Solana secret key), RPC_URL, NETWORK (CAIP-2), EXACT_URL.
"""

import json
import os

import requests
from x402 import x402ClientSync
from x402.http.clients import wrapRequestsWithPayment
from x402.http.utils import decode_payment_response_header
from x402.mechanisms.svm.exact import ExactSvmScheme
from x402.mechanisms.svm.signers import KeypairSigner


def main() -> None:
    signer = KeypairSigner.from_bytes(bytes.fromhex(os.environ["BUYER_SECRET_KEY"]))
    client = x402ClientSync().register(os.environ["NETWORK"], ExactSvmScheme(signer, rpc_url=os.environ["RPC_URL"]))
    session = wrapRequestsWithPayment(requests.Session(), client)
    response = session.get(os.environ["EXACT_URL"])
    header = response.headers.get("PAYMENT-RESPONSE")
    settlement = decode_payment_response_header(header).model_dump(by_alias=True, exclude_none=True) if header else None
    print(json.dumps({"status": response.status_code, "body": response.text, "settlement": settlement}))


if __name__ == "__main__":
    main()
