// Runs the embedded database on a data folder until it is killed: tests kill it the hard way and check
// that the next start is not blocked. Prints "ready <uri>" once the server answers.
import { provideMongoServer } from '../../server/dev/database/mongo-server.js';

const server = await provideMongoServer({ dataDir: process.argv[2], env: { ...process.env, MONGODB_URI: '' } });
process.stdout.write(`ready ${server.uri}\n`);
setInterval(() => {}, 1 << 30);
