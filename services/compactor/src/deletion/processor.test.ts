import { deletionSuite } from "./suite.test-helper.js";
import { tempStore } from "./testdata.test-helper.js";

deletionSuite("the file store", tempStore);
