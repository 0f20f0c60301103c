// An MCP client on the official TypeScript SDK that lists the tools of
// MCP_URL and calls one (MCP_TOOL with the JSON arguments MCP_ARGS), with
// an optional bearer token (MCP_TOKEN), and prints one JSON line: the
// tool names, the result and the elicitation messages it was asked. With
// MCP_ELICIT (a JSON elicitation result) the client declares form
// elicitation and answers every elicitation/create with it. examples/hello's
// test runs it with node, and the root package's Elicit test.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(env('MCP_URL')), { requestInit: { headers } });
const answer = process.env.MCP_ELICIT ? JSON.parse(process.env.MCP_ELICIT) : null;
const client = new Client({ name: 'mcpgrain-ts-test', version: '1.0.0' }, answer ? { capabilities: { elicitation: { form: {} } } } : {});
const asked = [];
if (answer) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params.message);
    return answer;
  });
}
await client.connect(transport);
const tools = await client.listTools();
const result = await client.callTool({ name: env('MCP_TOOL'), arguments: JSON.parse(process.env.MCP_ARGS ?? '{}') });
console.log(JSON.stringify({ tools: tools.tools.map((t) => t.name), result, asked }));
await client.close();
