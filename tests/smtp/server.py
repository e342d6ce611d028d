"""A real SMTP server for the tests (aiosmtpd): listens on 127.0.0.1 on a free port, prints `listening <port>`,
and writes each message it receives to <directory>/<n>.json as {"from", "to", "subject", "body", "raw"} (the
body decoded from its transfer encoding), with "tls": whether the message came over TLS. Stops when its standard
input closes.

`server.py <directory> starttls <cert.pem> <key.pem>` offers STARTTLS with that certificate and refuses mail
before it; `server.py <directory> smtps <cert.pem> <key.pem>` speaks TLS from the first byte."""

import asyncio
import email
import email.policy
import json
import os
import ssl
import sys

from aiosmtpd.smtp import SMTP


class Keeper:
    def __init__(self, directory):
        self.directory = directory
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        body = message.get_body(preferencelist=("plain",))
        record = {
            "from": envelope.mail_from,
            "to": envelope.rcpt_tos,
            "subject": str(message["subject"]),
            "body": body.get_content() if body is not None else "",
            "raw": envelope.content.decode("utf-8", "replace"),
            "tls": session.ssl is not None or server.transport.get_extra_info("sslcontext") is not None,
        }
        self.count += 1
        path = os.path.join(self.directory, f"{self.count:06}.json")
        with open(path + ".part", "w") as f:
            json.dump(record, f)
        os.rename(path + ".part", path)
        return "250 OK"


async def main(directory, mode=None, cert=None, key=None):
    loop = asyncio.get_running_loop()
    keeper = Keeper(directory)
    context = None
    if mode is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    if mode == "starttls":
        factory = lambda: SMTP(keeper, hostname="mail.test", tls_context=context, require_starttls=True)
        server = await loop.create_server(factory, "127.0.0.1", 0)
    elif mode == "smtps":
        server = await loop.create_server(lambda: SMTP(keeper, hostname="mail.test"), "127.0.0.1", 0, ssl=context)
    else:
        server = await loop.create_server(lambda: SMTP(keeper, hostname="mail.test"), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
