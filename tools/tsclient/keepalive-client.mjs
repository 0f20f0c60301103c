// An MCP client built on the official TypeScript SDK that makes one long
// tool call: gateway/keepalive_proxy_test.go runs it through a reverse
// proxy that cuts idle streams, so the SDK's SSE parser reads the
// gateway's keepalive comments while the call waits. It prints one JSON
// line: the call's result.
//
// Environment: MCP_URL (the /mcp endpoint), MCP_TOKEN (a bearer token),
// MCP_TOOL and MCP_ARGS (the tool to call, JSON arguments).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const transport = new StreamableHTTPClientTransport(new URL(env('MCP_URL')), {
  requestInit: { headers: { Authorization: `Bearer ${env('MCP_TOKEN')}` } },
});
const client = new Client({ name: 'mcpgrain-ts-keepalive-test', version: '1.0.0' });
await client.connect(transport);
const result = await client.callTool(
  { name: env('MCP_TOOL'), arguments: JSON.parse(process.env.MCP_ARGS ?? '{}') },
  undefined,
  { timeout: 120000 },
);
console.log(JSON.stringify({ result }));
await client.close();
