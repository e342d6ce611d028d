// @ts-check
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonPath } from '../js/lib/json_path.js';

test('names, indexes and names that need bracket quotes', () => {
  assert.equal(jsonPath([]), '$');
  assert.equal(jsonPath(['data', 0, 'id']), '$.data[0].id');
  assert.equal(jsonPath(['x-id', 'a b', '0', '_ok9']), "$['x-id']['a b']['0']._ok9");
  assert.equal(jsonPath(["it's", 'back\\slash']), "$['it\\'s']['back\\\\slash']");
});
