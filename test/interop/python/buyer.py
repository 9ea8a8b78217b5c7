"""A buyer on the official x402 Python SDK (PyPI `x402`) paying our routes: `batch-settlement`, and `exact`.

Run by test/interop/python-channel-buyer.test.ts. It pays CALLS calls to ROUTE_URL through the SDK's
`requests` integration with its `BatchSettlementEvmScheme` client (the first call deposits, each next one
sends a voucher), then sends the last call's PAYMENT-SIGNATURE header once more, as a replay, and prints
one JSON object: what each call got, and what the replay got. With EXACT_URL, it first pays one call to
that route by `exact` with the SDK's ExactEvmScheme client (registered on the same client).

Environment: BUYER_PRIVATE_KEY, RPC_URL (the chain the SDK's signer reads channel state from), NETWORK
(CAIP-2, e.g. eip155:84532), ASSET (the USDC it pays in), and ROUTE_URL with CALLS, or EXACT_URL, or both.
"""

import base64
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
from x402.mechanisms.evm.exact import ExactEvmScheme
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
    network = os.environ["NETWORK"]
    client = (
        x402ClientSync()
        .register(network, scheme)
        .register(network, ExactEvmScheme(signer))
        .set_spend_controls({
            "allowed_assets": [{"network": network, "asset": os.environ["ASSET"], "max_amount_per_payment": "1000000"}],
        })
    )
    session = wrapRequestsWithPayment(requests.Session(), client)
    url = os.environ.get("ROUTE_URL")

    exact = _paid_call(session, os.environ["EXACT_URL"]) if os.environ.get("EXACT_URL") else None
    calls = []
    last_header = None
    for _ in range(int(os.environ.get("CALLS", "0"))):
        call = _paid_call(session, url)
        last_header = call.pop("sent") or last_header
        calls.append(call)

    replay = requests.get(url, headers={"PAYMENT-SIGNATURE": last_header}, timeout=30) if last_header else None
    refused = None
    if replay is not None:
        required = replay.headers.get("PAYMENT-REQUIRED")
        refused = {
            "status": replay.status_code,
            "error": decode_payment_required_header(required).error if required else None,
        }
    if exact is not None:
        exact.pop("sent")
    json.dump({"buyer": account.address, "exact": exact, "calls": calls, "replay": refused}, sys.stdout)


def _paid_call(session: requests.Session, url: str) -> dict:
    """One call through the paying session: its answer, the payment it sent and the settlement it got."""
    res = session.get(url, timeout=30)
    sent = res.request.headers.get("PAYMENT-SIGNATURE")
    response_header = res.headers.get("PAYMENT-RESPONSE")
    payload = json.loads(base64.b64decode(sent))["payload"] if sent else None
    return {
        "status": res.status_code,
        "body": res.json() if res.headers.get("content-type", "").startswith("application/json") else res.text,
        "sent": sent,
        # A batch-settlement payload names its type (deposit, voucher); an exact one is an authorization.
        "paymentType": (payload.get("type") or ("authorization" if "authorization" in payload else None)) if payload else None,
        "settlement": decode_payment_response_header(response_header).model_dump(by_alias=True, exclude_none=True) if response_header else None,
    }


if __name__ == "__main__":
    main()
