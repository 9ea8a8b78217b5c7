"""A buyer on the official x402 Python SDK (PyPI `x402`) paying a route sold by `batch-settlement`.

Run by test/interop/python-channel-buyer.test.ts. It pays CALLS calls to ROUTE_URL through the SDK's
`requests` integration with its `BatchSettlementEvmScheme` client (the first call deposits, each next one
sends a voucher), then sends the last call's PAYMENT-SIGNATURE header once more, as a replay, and prints
one JSON object: what each call got, and what the replay got.

Environment: BUYER_PRIVATE_KEY, RPC_URL (the chain the SDK's signer reads channel state from), NETWORK
(CAIP-2, e.g. eip155:84532), ASSET (the USDC it pays in), ROUTE_URL, CALLS.
"""

import json
import os
import sys

import requests
from eth_account import Account
from x402 import x402ClientSync
from x402.http.clients import wrapRequestsWithPayment
from x402.http.utils import decode_payment_required_header, decode_payment_response_header
from x402.mechanisms.evm.batch_settlement.client import (
    BatchSettlementDepositPolicy,
    BatchSettlementEvmScheme,
    BatchSettlementEvmSchemeOptions,
    InMemoryClientChannelStorage,
)
from x402.mechanisms.evm.signers import EthAccountSignerWithRPC


def main() -> None:
    account = Account.from_key(os.environ["BUYER_PRIVATE_KEY"])
    signer = EthAccountSignerWithRPC(account, rpc_url=os.environ["RPC_URL"])
    scheme = BatchSettlementEvmScheme(
        signer,
        BatchSettlementEvmSchemeOptions(
            deposit_policy=BatchSettlementDepositPolicy(deposit_multiplier=10),
            storage=InMemoryClientChannelStorage(),
        ),
    )
    # Our dev chain's USDC is not one of the SDK's default assets: the buyer allows it, as a wallet
    # configured for a token of its own does (at most $1 a payment).
    client = x402ClientSync().register(os.environ["NETWORK"], scheme).set_spend_controls({
        "allowed_assets": [{"network": os.environ["NETWORK"], "asset": os.environ["ASSET"], "max_amount_per_payment": "1000000"}],
    })
    session = wrapRequestsWithPayment(requests.Session(), client)
    url = os.environ["ROUTE_URL"]

    calls = []
    last_header = None
    for _ in range(int(os.environ["CALLS"])):
        res = session.get(url, timeout=30)
        sent = res.request.headers.get("PAYMENT-SIGNATURE")
        last_header = sent or last_header
        response_header = res.headers.get("PAYMENT-RESPONSE")
        calls.append({
            "status": res.status_code,
            "body": res.json() if res.headers.get("content-type", "").startswith("application/json") else res.text,
            "paymentType": json.loads(_b64(sent))["payload"].get("type") if sent else None,
            "settlement": decode_payment_response_header(response_header).model_dump(by_alias=True, exclude_none=True) if response_header else None,
        })

    replay = requests.get(url, headers={"PAYMENT-SIGNATURE": last_header}, timeout=30) if last_header else None
    refused = None
    if replay is not None:
        required = replay.headers.get("PAYMENT-REQUIRED")
        refused = {
            "status": replay.status_code,
            "error": decode_payment_required_header(required).error if required else None,
        }
    json.dump({"buyer": account.address, "calls": calls, "replay": refused}, sys.stdout)


def _b64(header: str) -> str:
    import base64
    return base64.b64decode(header).decode("utf-8")


if __name__ == "__main__":
    main()
