/** upload-scanning.test.ts again, in the suite's S3 mode: its files in an S3-compatible bucket (s3rver on loopback). */
import { inS3Mode } from '../helpers/s3.js';

await inS3Mode();
await import('./upload-scanning.test.js');
