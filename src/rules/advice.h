// Words the rules' report advice shares (RuleType::advice in each rule's file): the tensors a
// firing names, the data-loader fix the measurements suggest, the evidence of a GPU waiting.
#pragma once

#include <string>

#include "trainscope/rule_advice.h"
#include "trainscope/types.h"
#include "util/text_format.h"

namespace trainscope::rules::advice {

// "gradients/fc1 and 3 more", or "the watched tensors" when the event names none.
std::string TensorList(const RuleEventRecord& e);
// "raise num_workers from 2 to 6 and set pin_memory=True": from the cores each GPU has.
std::string LoaderFix(const Measurements& m);
// "GPU idle 40% of the time while the data loader waited 12 ms per step (30% of step time)";
// empty when neither is known.
std::string WaitEvidence(const Measurements& m);
std::string Cap(std::string s);  // first letter upper case

}  // namespace trainscope::rules::advice
